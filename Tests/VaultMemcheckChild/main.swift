// securefoundation-memcheck-child: a helper process for the vault's memory-scan test.
//
// Usage: securefoundation-memcheck-child --home DIR --device-key FILE --passcode-file F --answers-file F
// Then commands on standard input, one per line; each is answered with one line on standard output:
//   setup            store temporaries from the files, finalize   -> "key HEX"
//   unlock-passcode  unlock with the passcode file                -> "key HEX"
//   unlock-answers   unlock with the answers file                 -> "key HEX"
//   encrypt          seal and open a message with the key     -> "sealed"
//   keychain         add the --item-file secret as a whenUnlocked keychain item (account from
//                    --account), read it back, wipe, close the keychain -> "read N"
//   sealed-open      seal the --item-file secret under a new key, open it, wipe -> "opened N"
//   protected-file   write the --item-file secret as a complete protected file (--file),
//                    read it whole and through a streaming reader, wipe, close -> "protected N"
//   purge            lock()                                       -> "locked"
//   exit                                                          -> exits
// Secrets are read from files straight into SecretBytes, never through argv or String.
// The key is printed only so the test knows what to look for (a debug hook, never for applications).
import Foundation
import Cipher
import Keychain
import ProtectedFiles
import Vault

func argument(_ name: String) -> String? {
    let arguments = CommandLine.arguments
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func reply(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Splits a file's bytes into lines without passing them through String.
func readLines(_ path: String) throws -> [SecretBytes] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw VaultError.io("cannot open \(path)") }
    defer { close(fd) }
    let all = try SecretBytes(readingFrom: fd, trimNewline: true, name: path)
    defer { all.wipe() }
    var lines: [SecretBytes] = []
    var start = 0
    all.withUnsafeBytes { bytes in
        for index in 0...bytes.count where index == bytes.count || bytes[index] == 0x0A {
            if index > start || index < bytes.count {
                let s = start
                lines.append(SecretBytes(count: index - s) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[s..<index])) })
            }
            start = index + 1
        }
    }
    return lines
}

guard let home = argument("--home"), let deviceKey = argument("--device-key"),
      let passcodeFile = argument("--passcode-file"), let answersFile = argument("--answers-file") else {
    reply("error usage")
    exit(2)
}

do {
    let manager = try CryptoManager(directory: home, deviceKeyProvider: FileDeviceKeyProvider(path: deviceKey),
                                    policy: .minimum, attemptPolicy: .unlimited)
    reply("pid \(getpid())")
    while let command = readLine() {
        do {
            switch command {
            case "setup":
                let passcode = try SecretBytes(contentsOfFile: passcodeFile)
                let answers = try readLines(answersFile)
                try manager.storeTemporaryPasscode(passcode)
                passcode.wipe()
                try manager.storeTemporarySecurityQuestions(answers.indices.map { "Question \($0 + 1)?" }, answers: answers, threshold: 2)
                answers.forEach { $0.wipe() }
                try manager.finalize()
                reply("key \(manager._applicationKeyHexForTesting() ?? "-")")
            case "unlock-passcode":
                let passcode = try SecretBytes(contentsOfFile: passcodeFile)
                try manager.unlock(passcode: passcode)
                passcode.wipe()
                reply("key \(manager._applicationKeyHexForTesting() ?? "-")")
            case "unlock-answers":
                let answers = try readLines(answersFile)
                try manager.unlock(answers: answers)
                answers.forEach { $0.wipe() }
                reply("key \(manager._applicationKeyHexForTesting() ?? "-")")
            case "encrypt":
                let sealed = try manager.encrypt(Array("memory check".utf8))
                let opened = try manager.decrypt(sealed)
                reply(opened == Array("memory check".utf8) ? "sealed" : "error mismatch")
            case "keychain":
                guard let itemFile = argument("--item-file"), let account = argument("--account") else { reply("error usage"); continue }
                let secret = try SecretBytes(contentsOfFile: itemFile)
                let keychain = try Keychain(manager: manager)
                try keychain.add(secret, for: .generic(service: "memcheck", account: account), accessibility: .whenUnlocked)
                secret.wipe()
                try keychain.flush()
                let read = try keychain.securePasswordData(forService: "memcheck", account: account)
                let count = read.count
                read.wipe()
                try keychain.close()
                reply("read \(count)")
            case "sealed-open":
                guard let itemFile = argument("--item-file") else { reply("error usage"); continue }
                let secret = try SecretBytes(contentsOfFile: itemFile)
                let key = try SealingKey.generate()
                let sealed = try secret.withUnsafeBytes { try Sealed.seal($0, with: key) }
                secret.wipe()
                var opened = try Sealed.open(sealed, with: key)
                let count = opened.count
                opened.withUnsafeMutableBytes { bytes in for index in bytes.indices { bytes[index] = 0 } }
                reply("opened \(count)")
            case "protected-file":
                guard let itemFile = argument("--item-file"), let file = argument("--file") else { reply("error usage"); continue }
                let secret = try SecretBytes(contentsOfFile: itemFile)
                let files = ProtectedFiles(manager: manager)
                try secret.withUnsafeBytes { try files.write($0, to: file, protection: .complete) }
                secret.wipe()
                var whole = try files.read(at: file)
                let count = whole.count
                for index in whole.indices { whole[index] = 0 }
                let reader = try files.openForReading(at: file)
                var streamed = try reader.read(upToCount: count)
                for index in streamed.indices { streamed[index] = 0 }
                reader.close()
                reply("protected \(count)")
            case "purge":
                manager.lock()
                reply(manager.isUnlocked ? "unlocked" : "locked")
            case "exit":
                exit(0)
            default:
                reply("error unknown command")
            }
        } catch {
            reply("error \(error)")
        }
    }
} catch {
    reply("error \(error)")
    exit(1)
}
