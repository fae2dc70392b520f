import Testing
@testable import Cipher
