import Testing
@testable import Keychain
