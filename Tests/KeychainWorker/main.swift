// A separate process for the keychain's multi-process and crash tests.
//
//   KeychainWorker write DIR MASTER_HEX PREFIX COUNT FLUSH_EVERY
//
// Sets COUNT items (service PREFIX, accounts PREFIX-0...), flushing every FLUSH_EVERY items and
// printing "ack N" (N items durable) after each flush.
//
//   KeychainWorker upsert DIR MASTER_HEX SERVICE ACCOUNT COUNT
//   KeychainWorker delete DIR MASTER_HEX SERVICE ACCOUNT COUNT
//
// COUNT times, adds-or-updates (always class) or deletes one item and flushes. Exits 3 on the
// first error of an upsert (printing it); a delete of a missing item is no error.
import Foundation
import Cipher
import Keychain

func fail(_ message: String, code: Int32 = 2) -> Never {
    FileHandle.standardError.write(Data("KeychainWorker: \(message)\n".utf8))
    exit(code)
}

let arguments = CommandLine.arguments
if arguments.count == 7, arguments[1] == "upsert" || arguments[1] == "delete", let count = Int(arguments[6]) {
    let keychain: Keychain
    do {
        let master = SecretBytes(copying: try Encoding.fromHex(arguments[3]))
        keychain = try Keychain(directory: arguments[2], keySource: try StaticKeySource(masterKey: master))
    } catch {
        fail("\(error)")
    }
    let key = ItemKey.generic(service: arguments[4], account: arguments[5])
    for index in 0..<count {
        do {
            if arguments[1] == "upsert" {
                try keychain.addOrUpdate(SecretBytes(utf8: "value-\(index)"), for: key, accessibility: .always)
            } else {
                do { try keychain.deletePassword(forService: key.service, account: key.account) } catch KeychainError.itemNotFound {}
            }
            try keychain.flush()
        } catch {
            fail("\(arguments[1]) \(index): \(error)", code: 3)
        }
    }
    exit(0)
}
guard arguments.count == 7, arguments[1] == "write",
      let count = Int(arguments[5]), let flushEvery = Int(arguments[6]), flushEvery > 0 else {
    fail("usage: KeychainWorker write DIR MASTER_HEX PREFIX COUNT FLUSH_EVERY | upsert|delete DIR MASTER_HEX SERVICE ACCOUNT COUNT")
}
do {
    let master = SecretBytes(copying: try Encoding.fromHex(arguments[3]))
    let keychain = try Keychain(directory: arguments[2], keySource: try StaticKeySource(masterKey: master))
    let prefix = arguments[4]
    for index in 0..<count {
        try keychain.setPassword("\(prefix)-value-\(index)", forService: prefix, account: "\(prefix)-\(index)")
        if (index + 1) % flushEvery == 0 || index + 1 == count {
            try keychain.flush()
            let line = Array("ack \(index + 1)\n".utf8)
            try line.withUnsafeBytes { try SecureFile.writeAll(1, $0, path: "standard output") }
        }
    }
} catch {
    fail("\(error)")
}
