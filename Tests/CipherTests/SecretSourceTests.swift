import Foundation
import Testing
@testable import Cipher

@Suite struct SecretSourceTests {
    @Test func aFileLosesOneTrailingNewlineUnlessAskedToKeepIt() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/secret"
        try Data("pass phrase\r\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(try SecretSource.file(path).read() == SecretBytes(utf8: "pass phrase"))
        #expect(try SecretSource.file(path).read(trimNewline: false) == SecretBytes(utf8: "pass phrase\r\n"))
        #expect(throws: CipherError.io("\(path) is larger than 4 bytes; a secret file holds one line")) {
            try SecretSource.file(path).read(maxLength: 4)
        }
        #expect(throws: CipherError.io("cannot open \(directory.path)/missing: No such file or directory")) {
            try SecretSource.file(directory.path + "/missing").read()
        }
    }

    @Test func theEnvironmentIsReadAndAnUnsetOrEmptyVariableIsRefused() throws {
        setenv("SF_TEST_SECRET_SOURCE", "from the environment", 1)
        setenv("SF_TEST_SECRET_SOURCE_EMPTY", "", 1)
        defer { unsetenv("SF_TEST_SECRET_SOURCE"); unsetenv("SF_TEST_SECRET_SOURCE_EMPTY") }
        #expect(try SecretSource.environment("SF_TEST_SECRET_SOURCE").read() == SecretBytes(utf8: "from the environment"))
        #expect(throws: CipherError.io("the environment variable SF_TEST_SECRET_SOURCE_EMPTY is empty")) {
            try SecretSource.environment("SF_TEST_SECRET_SOURCE_EMPTY").read()
        }
        #expect(throws: CipherError.io("the environment variable SF_TEST_SECRET_SOURCE_UNSET is not set")) {
            try SecretSource.environment("SF_TEST_SECRET_SOURCE_UNSET").read()
        }
        #expect(throws: CipherError.io("the environment variable SF_TEST_SECRET_SOURCE is longer than 4 bytes")) {
            try SecretSource.environment("SF_TEST_SECRET_SOURCE").read(maxLength: 4)
        }
    }

    @Test func aPromptsErrorsPassUnchanged() throws {
        struct NoTerminal: Error, Equatable {}
        #expect(throws: NoTerminal()) { try SecretSource.prompt { throw NoTerminal() }.read() }
        #expect(try SecretSource.prompt { SecretBytes(utf8: "typed") }.read() == SecretBytes(utf8: "typed"))
        #expect(try SecretSource.secret(SecretBytes(utf8: "held")).read() == SecretBytes(utf8: "held"))
    }
}
