import Testing
@testable import Age
