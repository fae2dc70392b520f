import Testing
@testable import Shredder
