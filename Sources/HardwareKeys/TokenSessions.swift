import Cipher
import Foundation
internal import CPKCS11

/// PKCS #11 constants this module uses (values of the PKCS #11 standard).
enum CK {
    static let objectClassPublicKey: UInt = 2
    static let objectClassPrivateKey: UInt = 3
    static let objectClassSecretKey: UInt = 4
    static let keyTypeRSA: UInt = 0
    static let keyTypeEC: UInt = 3
    static let keyTypeGenericSecret: UInt = 0x10
    static let anyKeyType: UInt = ~0
    static let attributeLabel: UInt = 3
    static let attributeKeyType: UInt = 0x100
    static let attributeID: UInt = 0x102
    static let attributeSensitive: UInt = 0x103
    static let attributeModulus: UInt = 0x120
    static let attributePublicExponent: UInt = 0x122
    static let attributeExtractable: UInt = 0x162
    static let attributeECParams: UInt = 0x180
    static let attributeECPoint: UInt = 0x181
    static let mechanismRSAPKCS: UInt = 1
    static let mechanismRSAPSS: UInt = 0xd
    static let mechanismSHA256HMAC: UInt = 0x251
    static let mechanismECDSA: UInt = 0x1041
    static let rvUserNotLoggedIn: UInt = 0x101
    static let rvSessionHandleInvalid: UInt = 0xb3
    static let rvSessionClosed: UInt = 0xb0
}

/// The sessions of one key: a session kept open while the key lives (the login of the token
/// lasts as long as one session of the application is open) and idle sessions, each used by
/// one thread at a time as PKCS #11 requires, with the key's handle found in it.
final class TokenSessions: @unchecked Sendable {
    let module: PKCS11Module
    let slot: UInt
    private let pin: SecretBytes?
    private let anchor: UInt
    private let find: @Sendable (PKCS11Module, UInt) throws(HardwareKeyError) -> UInt
    private let lock = NSLock()
    private var idle: [(session: UInt, object: UInt)] = []
    private static let idleLimit = 16

    /// Opens the anchor session and logs in with the PIN when the token requires it.
    init(module: PKCS11Module, slot: UInt, pin: SecretBytes?,
         find: @escaping @Sendable (PKCS11Module, UInt) throws(HardwareKeyError) -> UInt) throws(HardwareKeyError) {
        self.module = module
        self.slot = slot
        self.pin = pin
        self.find = find
        var session: UInt = 0
        try module.call("C_OpenSession", cpk_open_session(module.handle, slot, &session))
        self.anchor = session
        if let pin {
            let rv = pin.withUnsafeBytes { bytes in
                cpk_login(module.handle, session, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count)
            }
            if rv != 0 {
                _ = cpk_close_session(module.handle, session)
                throw .pkcs11(function: "C_Login", returnValue: rv)
            }
        }
    }

    deinit {
        for entry in idle { _ = cpk_close_session(module.handle, entry.session) }
        _ = cpk_close_session(module.handle, anchor)
        pin?.wipe()
    }

    /// The anchor session, for lookups done once while the key is being opened.
    var anchorSession: UInt { anchor }

    /// Runs `body` with a session no other thread uses and the key's handle in it. A session
    /// the token has closed is dropped; a token that forgot the login (reinserted) is logged
    /// in again once.
    func with<T>(_ body: (UInt, UInt) throws(HardwareKeyError) -> T) throws(HardwareKeyError) -> T {
        var retried = false
        while true {
            let entry = try take()
            do {
                let result = try body(entry.session, entry.object)
                give(entry)
                return result
            } catch {
                _ = cpk_close_session(module.handle, entry.session)
                if case .pkcs11(_, let rv) = error, !retried,
                   rv == CK.rvUserNotLoggedIn || rv == CK.rvSessionHandleInvalid || rv == CK.rvSessionClosed {
                    retried = true
                    dropIdle()
                    if rv == CK.rvUserNotLoggedIn { try login() }
                    continue
                }
                throw error
            }
        }
    }

    private func take() throws(HardwareKeyError) -> (session: UInt, object: UInt) {
        if let entry = lock.withLock({ idle.popLast() }) { return entry }
        var session: UInt = 0
        try module.call("C_OpenSession", cpk_open_session(module.handle, slot, &session))
        do {
            return (session, try find(module, session))
        } catch {
            _ = cpk_close_session(module.handle, session)
            throw error
        }
    }

    private func give(_ entry: (session: UInt, object: UInt)) {
        let kept = lock.withLock {
            guard idle.count < Self.idleLimit else { return false }
            idle.append(entry)
            return true
        }
        if !kept { _ = cpk_close_session(module.handle, entry.session) }
    }

    private func dropIdle() {
        let dropped = lock.withLock { defer { idle.removeAll() }; return idle }
        for entry in dropped { _ = cpk_close_session(module.handle, entry.session) }
    }

    private func login() throws(HardwareKeyError) {
        guard let pin else { return }
        let rv = pin.withUnsafeBytes { bytes in
            cpk_login(module.handle, anchor, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count)
        }
        try module.call("C_Login", rv)
    }

    // MARK: Calls on a session

    static func find(_ module: PKCS11Module, session: UInt, objectClass: UInt, keyType: UInt = CK.anyKeyType,
                     label: [UInt8]?, id: [UInt8]?, limit: Int = 2) throws(HardwareKeyError) -> [UInt] {
        var objects = [UInt](repeating: 0, count: limit)
        var count = UInt(limit)
        let rv: UInt = withOptionalBytes(label) { labelPointer, labelCount in
            withOptionalBytes(id) { idPointer, idCount in
                cpk_find(module.handle, session, objectClass, keyType, labelPointer, labelCount, idPointer, idCount,
                         &objects, &count)
            }
        }
        try module.call("C_FindObjects", rv)
        return Array(objects.prefix(Int(min(count, UInt(limit)))))
    }

    static func attribute(_ module: PKCS11Module, session: UInt, object: UInt, type: UInt) throws(HardwareKeyError) -> [UInt8] {
        var length: UInt = 0
        try module.call("C_GetAttributeValue", cpk_attribute(module.handle, session, object, type, nil, &length))
        guard length <= 64 * 1024 else { throw .unsupportedKey("an attribute of \(length) bytes") }
        var value = [UInt8](repeating: 0, count: Int(length))
        try module.call("C_GetAttributeValue", cpk_attribute(module.handle, session, object, type, &value, &length))
        return Array(value.prefix(Int(length)))
    }

    static func bool(_ module: PKCS11Module, session: UInt, object: UInt, type: UInt) -> Bool? {
        guard let value = try? attribute(module, session: session, object: object, type: type), value.count == 1 else { return nil }
        return value[0] != 0
    }

    static func ulong(_ module: PKCS11Module, session: UInt, object: UInt, type: UInt) throws(HardwareKeyError) -> UInt {
        let value = try attribute(module, session: session, object: object, type: type)
        guard value.count == MemoryLayout<UInt>.size else { throw .unsupportedKey("a CK_ULONG attribute of \(value.count) bytes") }
        return value.withUnsafeBytes { $0.loadUnaligned(as: UInt.self) }
    }

    static func sign(_ module: PKCS11Module, session: UInt, key: UInt, mechanism: UInt, pssHashBits: UInt32 = 0,
                     data: [UInt8], maxLength: Int) throws(HardwareKeyError) -> [UInt8] {
        var signature = [UInt8](repeating: 0, count: maxLength)
        var length = UInt(maxLength)
        try module.call("C_Sign", cpk_sign(module.handle, session, key, mechanism, pssHashBits, data, data.count, &signature, &length))
        return Array(signature.prefix(Int(min(length, UInt(maxLength)))))
    }

    /// As ``sign(_:session:key:mechanism:pssHashBits:data:maxLength:)`` for an output that is a
    /// secret (an HMAC that becomes a key): written straight into locked memory.
    static func signSecret(_ module: PKCS11Module, session: UInt, key: UInt, mechanism: UInt, data: [UInt8]) throws(HardwareKeyError) -> SecretBytes {
        var length: UInt = 64
        var rv: UInt = 0
        let scratch = SecretBytes(count: 64) { buffer in
            rv = cpk_sign(module.handle, session, key, mechanism, 0, data, data.count, buffer.bindMemory(to: UInt8.self).baseAddress, &length)
        }
        defer { scratch.wipe() }
        try module.call("C_Sign", rv)
        return scratch.slice(0..<Int(min(length, 64)))
    }

    private static func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafePointer<UInt8>?, Int) -> R) -> R {
        guard let bytes else { return body(nil, 0) }
        return bytes.withUnsafeBufferPointer { body($0.baseAddress ?? UnsafePointer(bitPattern: 1), $0.count) }
    }
}
