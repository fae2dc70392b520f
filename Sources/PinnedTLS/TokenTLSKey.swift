import HardwareKeys
import NIOCore
import NIOPosix
import NIOSSL

/// A key that stays in hardware (a PKCS #11 token, the TPM) as swift-nio-ssl takes a custom
/// key: BoringSSL hands the data to sign, the hardware signs it on NIO's blocking thread pool
/// (a token may take milliseconds; the event loop never waits), and a failure fails the
/// handshake. Nothing falls back to a software key.
struct TokenTLSKey: NIOSSLCustomPrivateKey, Hashable {
    let key: any HardwareSigningKey

    static func == (lhs: TokenTLSKey, rhs: TokenTLSKey) -> Bool { lhs.key === rhs.key }
    func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(key)) }

    /// TLS signature schemes and the token's schemes they are made with.
    static func scheme(_ algorithm: SignatureAlgorithm) -> HardwareSignatureScheme? {
        switch algorithm {
        case .ecdsaSecp256R1Sha256: .ecdsaSHA256
        case .ecdsaSecp384R1Sha384: .ecdsaSHA384
        case .rsaPssRsaeSha256: .rsaPSSSHA256
        case .rsaPssRsaeSha384: .rsaPSSSHA384
        case .rsaPssRsaeSha512: .rsaPSSSHA512
        case .rsaPkcs1Sha256: .rsaPKCS1SHA256
        case .rsaPkcs1Sha384: .rsaPKCS1SHA384
        case .rsaPkcs1Sha512: .rsaPKCS1SHA512
        default: nil
        }
    }

    var signatureAlgorithms: [SignatureAlgorithm] {
        let schemes = Set(key.signatureSchemes)
        let all: [SignatureAlgorithm] = [.ecdsaSecp256R1Sha256, .ecdsaSecp384R1Sha384, .rsaPssRsaeSha256, .rsaPssRsaeSha384,
                                         .rsaPssRsaeSha512, .rsaPkcs1Sha256, .rsaPkcs1Sha384, .rsaPkcs1Sha512]
        return all.filter { Self.scheme($0).map(schemes.contains) ?? false }
    }

    func sign(channel: any Channel, algorithm: SignatureAlgorithm, data: ByteBuffer) -> EventLoopFuture<ByteBuffer> {
        guard let scheme = Self.scheme(algorithm) else {
            return channel.eventLoop.makeFailedFuture(HardwareKeyError.unsupportedKey("TLS signature algorithm \(algorithm)"))
        }
        let message = Array(data.readableBytesView)
        let key = self.key
        let allocator = channel.allocator
        return NIOThreadPool.singleton.runIfActive(eventLoop: channel.eventLoop) { () throws(HardwareKeyError) -> [UInt8] in
            try key.signature(for: message, scheme: scheme)
        }.map { allocator.buffer(bytes: $0) }
    }

    /// RSA key exchange (TLS 1.2 without ECDHE) is not offered: PinnedTLS's cipher suites are
    /// ECDHE only, so this is never called.
    func decrypt(channel: any Channel, data: ByteBuffer) -> EventLoopFuture<ByteBuffer> {
        channel.eventLoop.makeFailedFuture(HardwareKeyError.unsupportedKey("RSA key exchange (decryption) with a token key"))
    }
}
