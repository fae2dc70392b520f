import Testing
@testable import Vault
