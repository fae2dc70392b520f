// swift-tools-version: 6.1
import PackageDescription

let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

/// The version the command-line tool reports (`securefoundation --version`): the build's
/// `SECUREFOUNDATION_VERSION` environment variable (scripts/build-release sets it from
/// `git describe`), given to the one C file of CBuildInfo as a define, so a new version
/// recompiles that file and relinks, nothing else. Without it (or with characters other than
/// letters, digits and `.+-_`) the tool says 0.0.0-dev.
let buildVersion: [CSetting] = {
    guard let version = Context.environment["SECUREFOUNDATION_VERSION"], !version.isEmpty, version.count <= 64,
          version.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._+-".contains($0)) })
    else { return [] }
    return [.define("SECUREFOUNDATION_VERSION", to: "\"\(version)\"")]
}()

let crypto: [Target.Dependency] = [
    .product(name: "Crypto", package: "swift-crypto"),
    .product(name: "CryptoExtras", package: "swift-crypto"),
]

let package = Package(
    name: "SecureFoundation",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "SecureFoundation", targets: ["SecureFoundation"]),
        .library(name: "Cipher", targets: ["Cipher"]),
        .library(name: "Shredder", targets: ["Shredder"]),
        .library(name: "Age", targets: ["Age"]),
        .library(name: "Vault", targets: ["Vault"]),
        .library(name: "Keychain", targets: ["Keychain"]),
        .library(name: "ProtectedFiles", targets: ["ProtectedFiles"]),
        .library(name: "ProtectedDatabase", targets: ["ProtectedDatabase"]),
        .library(name: "PinnedTLS", targets: ["PinnedTLS"]),
        .library(name: "HardwareKeys", targets: ["HardwareKeys"]),
        .library(name: "HardwareDeviceKeys", targets: ["HardwareDeviceKeys"]),
        .library(name: "Migration", targets: ["Migration"]),
        .library(name: "UnlockAgent", targets: ["UnlockAgent"]),
        .executable(name: "securefoundation", targets: ["SecureFoundationCLI"]),
        .executable(name: "securefoundation-front", targets: ["SecureFoundationFront"]),
        .executable(name: "securefoundation-bench", targets: ["SecureFoundationBench"]),
        .library(name: "EmbeddedSecrets", targets: ["EmbeddedSecrets"]),
        .executable(name: "embedded-secrets-generator", targets: ["EmbeddedSecretsGeneratorTool"]),
        .plugin(name: "SecretsPlugin", targets: ["SecretsPlugin"]),
        .library(name: "DeviceSharing", targets: ["DeviceSharing"]),
        // Integrations with server stacks: separate products, so that an application without
        // them builds none of them (docs/SERVER-SWIFT.md).
        .library(name: "PinnedTLSHummingbird", targets: ["PinnedTLSHummingbird"]),
        .library(name: "PinnedTLSVapor", targets: ["PinnedTLSVapor"]),
        .library(name: "KeychainConfiguration", targets: ["KeychainConfiguration"]),
        .library(name: "PinnedTLSGRPC", targets: ["PinnedTLSGRPC"]),
        .library(name: "PinnedTLSOpenAPI", targets: ["PinnedTLSOpenAPI"]),
        .library(name: "SecureFoundationServices", targets: ["SecureFoundationServices"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        // The server-stack integrations only (each built for its own product).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/vapor/vapor.git", from: "4.122.3"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/grpc/grpc-swift-2.git", from: "2.4.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.5.1"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport.git", from: "2.9.2"),
        // KeychainConfiguration only (Hummingbird resolves it too).
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0"),
        // `swift package generate-documentation` (DocC); no code of it is linked.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
    ],
    targets: [
        // OS calls that Swift cannot reach portably (getrandom, explicit_bzero, memfd, FIEMAP).
        .target(name: "CPlatform"),
        // The build's version string (see `buildVersion` above).
        .target(name: "CBuildInfo", cSettings: buildVersion),
        // The AEADs of sealed data from swift-crypto's BoringSSL, with the key schedule in the
        // key's locked memory, behind a header that names no BoringSSL type (as CAgePayload).
        .target(name: "CSealAEAD", dependencies: [.product(name: "CryptoExtras", package: "swift-crypto")]),
        .target(name: "Cipher", dependencies: ["CPlatform", "CSealAEAD"] + crypto, swiftSettings: strict),
        .target(name: "Shredder", dependencies: ["Cipher", "CPlatform"] + crypto, swiftSettings: strict),
        // ChaCha20-Poly1305 of swift-crypto's BoringSSL for the age payload, behind a header of the
        // project's own that names no BoringSSL type (so no Swift module loads swift-crypto's
        // internal C module, which clashes with swift-nio-ssl's copy of BoringSSL).
        .target(name: "CAgePayload", dependencies: [.product(name: "CryptoExtras", package: "swift-crypto")]),
        .target(name: "Age", dependencies: ["Cipher", "Shredder", "CPlatform", "CAgePayload"] + crypto, swiftSettings: strict),
        .target(name: "Vault", dependencies: ["Cipher", "Shredder", "CPlatform"] + crypto, swiftSettings: strict),
        // The TPM 2.0 and PKCS #11 device-key providers, beside the hardware code they need, so
        // that Vault and the umbrella link neither; programs register them (the command line does).
        .target(name: "HardwareDeviceKeys", dependencies: ["Cipher", "Vault", "HardwareKeys"] + crypto, swiftSettings: strict),
        .target(
            name: "Keychain",
            dependencies: ["Cipher", "Vault", "CPlatform", .product(name: "GRDB", package: "GRDB.swift"),
                           // DirectStatement binds through the SQLite C API that GRDB links.
                           .product(name: "GRDBSQLite", package: "GRDB.swift")] + crypto,
            swiftSettings: strict
        ),
        .target(name: "ProtectedFiles", dependencies: ["Cipher", "Age", "Vault", "Shredder", "CPlatform"] + crypto, swiftSettings: strict),
        // The page codec of protected databases: an SQLite VFS on the system SQLite (the one GRDB
        // links), with swift-crypto's BoringSSL behind a header that names no BoringSSL type.
        .target(name: "CSQLiteCodec", dependencies: [.product(name: "CryptoExtras", package: "swift-crypto")],
                linkerSettings: [.linkedLibrary("sqlite3")]),
        // SQLite databases under a data-protection class, through GRDB, in SQLCipher 4's format.
        .target(
            name: "ProtectedDatabase",
            dependencies: ["Cipher", "Vault", "ProtectedFiles", "CSQLiteCodec", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: strict
        ),
        // TLS with the application's own anchors, pins and client certificates. Pulls SwiftNIO,
        // so it stays out of the umbrella.
        .target(
            name: "PinnedTLS",
            dependencies: [
                "Cipher", "Vault", "Keychain", "CPlatform", "HardwareKeys",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ] + crypto,
            swiftSettings: strict
        ),
        // PKCS #11 through one module loaded with dlopen, behind a header of the project's own that
        // names no PKCS #11 type (the p11-kit pkcs11.h is vendored beside the C file).
        .target(name: "CPKCS11", linkerSettings: [.linkedLibrary("dl", .when(platforms: [.linux]))]),
        // The TPM 2.0 through the TPM Software Stack (ESYS), loaded with dlopen at the first use
        // (Sources/CTPM2/include/ctpm2.h); its type headers are vendored, so nothing is needed to build.
        .target(name: "CTPM2", linkerSettings: [.linkedLibrary("dl", .when(platforms: [.linux]))]),
        // Keys that never leave a hardware token (PKCS #11): module loading, RFC 7512 URIs, PINs,
        // signing and HMAC through the token. No NIO: PinnedTLS adapts it to swift-nio-ssl.
        .target(name: "HardwareKeys", dependencies: ["Cipher", "CPKCS11", "CTPM2", "CPlatform", .product(name: "X509", package: "swift-certificates"),
                                                    .product(name: "SwiftASN1", package: "swift-asn1")] + crypto,
                swiftSettings: strict),
        // The unlock agent: holds an unlocked vault and serves class keys over a UNIX socket.
        // The agent's socket, frames and age plugin, below the vault (FoundationEssentials only):
        // the front program runs the plugin with them, so `age -j securefoundation` starts no
        // program that links the vault (docs/ARCHITECTURE.md, "Foundation and ICU").
        .target(name: "AgentWire", dependencies: ["Cipher", "Age", "CPlatform"] + crypto, swiftSettings: strict),
        .target(name: "UnlockAgent", dependencies: ["Cipher", "Vault", "Age", "ProtectedFiles", "CPlatform", "AgentWire"] + crypto, swiftSettings: strict),
        .target(
            name: "SecureFoundation",
            dependencies: ["Cipher", "Shredder", "Age", "Vault", "Keychain", "ProtectedFiles", "ProtectedDatabase", "UnlockAgent", "CPlatform"] + crypto,
            swiftSettings: strict
        ),
        // Reading what iMAS Secure Foundation wrote (its CBC format, 1,000-round PBKDF2), for
        // migration only: not part of the umbrella module, never used for new data.
        .target(name: "Migration", dependencies: ["Cipher", "Shredder", "Vault", "Keychain", "ProtectedFiles"] + crypto, swiftSettings: strict),
        // The age commands' command line without the argument parser (requests, the plain
        // command-line reader, exit statuses, terminal input), shared by the full program and
        // the front program.
        .target(name: "AgeCommandLine", dependencies: ["Age", "Cipher", "Shredder"], swiftSettings: strict),
        // The front program (docs/CLI.md, "Installed programs"): installed as `securefoundation`,
        // it runs a plain encrypt or decrypt itself and hands every other command line to the full
        // program. Only the age modules are linked, so it starts as fast as `age`.
        .executableTarget(name: "SecureFoundationFront", dependencies: ["AgeCommandLine", "Cipher", "AgentWire"], swiftSettings: strict),
        .executableTarget(
            name: "SecureFoundationCLI",
            dependencies: [
                "AgeCommandLine",
                "SecureFoundation",
                "HardwareDeviceKeys",
                "Cipher",
                "CBuildInfo",
                "PinnedTLS",
                "Migration",
                "DeviceSharing",
                "HardwareKeys",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                "EmbeddedSecrets",
                "EmbeddedSecretsGenerator",
                .product(name: "GRDB", package: "GRDB.swift"),
            ] + crypto,
            swiftSettings: strict
        ),
        .executableTarget(name: "SecureFoundationBench", dependencies: [
            "AgeCommandLine", "SecureFoundation", "Vault", "PinnedTLS", "DeviceSharing", "HardwareKeys", "PinnedTLSHummingbird",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdTLS", package: "hummingbird"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "X509", package: "swift-certificates"),
        ] + crypto, swiftSettings: strict),
        // Test helper: writes keychain items from a separate process (multi-process and kill -9 tests).
        .executableTarget(name: "KeychainWorker", dependencies: ["Keychain", "Cipher"], path: "Tests/KeychainWorker", swiftSettings: strict),
        .testTarget(name: "CipherTests", dependencies: ["Cipher", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "ShredderTests", dependencies: ["Shredder", "Cipher", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "AgeTests", dependencies: ["Age", "Cipher", "TestSupport"] + crypto, swiftSettings: strict),
        // Test helper, not a product: the vault's memory-scan test runs it (reads secrets from
        // files, prints its key on request). Named as the binary the test looks for.
        .executableTarget(name: "securefoundation-memcheck-child", dependencies: ["Vault", "Cipher", "Keychain", "ProtectedFiles"],
                          path: "Tests/VaultMemcheckChild", swiftSettings: strict),
        .testTarget(name: "VaultTests", dependencies: ["Vault", "HardwareDeviceKeys", "Cipher", "securefoundation-memcheck-child", "Age", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "KeychainTests", dependencies: ["Keychain", "KeychainConfiguration", .product(name: "Configuration", package: "swift-configuration"), "Cipher", "Vault", .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Crypto", package: "swift-crypto"),
                                                       "TestSupport"],
                    exclude: ["Fixtures"], swiftSettings: strict),
        .testTarget(name: "ProtectedDatabaseTests", dependencies: ["ProtectedDatabase", "ProtectedFiles", "Vault", "Cipher", "TestSupport",
                                                               .product(name: "GRDB", package: "GRDB.swift"),
                                                               .product(name: "Crypto", package: "swift-crypto"),
                                                               .product(name: "CryptoExtras", package: "swift-crypto")], swiftSettings: strict),
        .testTarget(name: "ProtectedFilesTests", dependencies: ["ProtectedFiles", "Age", "Vault", "Cipher", "TestSupport"], swiftSettings: strict),
        // Runs the built `securefoundation` binary: exit codes, stdout bytes, interop with real tools.
        .testTarget(name: "CLITests", dependencies: ["SecureFoundationCLI", "SecureFoundationFront", "AgeCommandLine", "Cipher", "TestSupport",
                                                  .product(name: "ArgumentParser", package: "swift-argument-parser")], swiftSettings: strict),
        // What tests share: an executor of their own threads for the network tests, temporary
        // directories, and the built executables (BuiltProducts).
        .target(name: "TestSupport", dependencies: ["PinnedTLS", "HardwareKeys", "Cipher", .product(name: "Logging", package: "swift-log")], path: "Tests/TestSupport", swiftSettings: strict),
        // grpc-swift 2 over its NIO transport: server and client transport security under the policy.
        .target(name: "PinnedTLSGRPC", dependencies: [
            "PinnedTLS",
            .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
        ], swiftSettings: strict),
        // swift-openapi-runtime: a ClientTransport under the policy, on PinnedHTTPClient.
        .target(name: "PinnedTLSOpenAPI", dependencies: [
            "PinnedTLS",
            .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
            .product(name: "NIOCore", package: "swift-nio"),
        ], swiftSettings: strict),
        // swift-service-lifecycle: the agent, the sharing receiver and a pinned TLS server as
        // Services for an application's ServiceGroup, logging through swift-log.
        .target(name: "SecureFoundationServices", dependencies: [
            "UnlockAgent", "DeviceSharing", "PinnedTLS", "Vault",
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
        ], swiftSettings: strict),
        // swift-configuration: keychain items as secret configuration values (KeychainConfigProvider).
        .target(name: "KeychainConfiguration", dependencies: [
            "Cipher", "Keychain", "Vault", .product(name: "Configuration", package: "swift-configuration"),
        ] + crypto, swiftSettings: strict),
        .testTarget(name: "PinnedTLSTests", dependencies: ["PinnedTLS", "PinnedTLSHummingbird", "PinnedTLSVapor", "PinnedTLSGRPC", "PinnedTLSOpenAPI",
                                                       "SecureFoundationServices",
                                                       .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                                                       .product(name: "Logging", package: "swift-log"),
                                                       .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                                                       .product(name: "HTTPTypes", package: "swift-http-types"),
                                                       .product(name: "GRPCCore", package: "grpc-swift-2"),
                                                       .product(name: "GRPCNIOTransportHTTP2", package: "grpc-swift-nio-transport"),
                                                       .product(name: "Hummingbird", package: "hummingbird"),
                                                       .product(name: "Vapor", package: "vapor"), "Keychain", "Vault", "Cipher", "TestSupport", "HardwareKeys",
                                                       .product(name: "NIOCore", package: "swift-nio"),
                                                       .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                                                       .product(name: "NIOPosix", package: "swift-nio"),
                                                       .product(name: "NIOTLS", package: "swift-nio"),
                                                       .product(name: "NIOSSL", package: "swift-nio-ssl"),
                                                       .product(name: "X509", package: "swift-certificates"),
                                                       .product(name: "SwiftASN1", package: "swift-asn1")] + crypto, swiftSettings: strict),
        // Hummingbird 2: HTTPS with a TLSIdentity and mutual TLS under a ClientAuthentication, the
        // validated client chain reachable from a handler (HTTPServerBuilder.pinnedTLS).
        .target(name: "PinnedTLSHummingbird", dependencies: [
            "PinnedTLS",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdCore", package: "hummingbird"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "X509", package: "swift-certificates"),
        ], swiftSettings: strict),
        // Vapor 4: the same through HTTPServer.Configuration.usePinnedTLS (Request.peerCertificateChain).
        .target(name: "PinnedTLSVapor", dependencies: [
            "PinnedTLS",
            .product(name: "Vapor", package: "vapor"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
        ], swiftSettings: strict),
        // Embedded secrets: the run-time reader (Cipher only), the generator the plugin and the CLI share.
        .target(name: "EmbeddedSecrets", dependencies: ["Cipher"] + crypto, swiftSettings: strict),
        .target(name: "EmbeddedSecretsGenerator", dependencies: ["EmbeddedSecrets", "Cipher"], swiftSettings: strict),
        .executableTarget(name: "EmbeddedSecretsGeneratorTool", dependencies: ["EmbeddedSecretsGenerator"], swiftSettings: strict),
        .plugin(name: "SecretsPlugin", capability: .buildTool(), dependencies: ["EmbeddedSecretsGeneratorTool"]),
        .testTarget(name: "EmbeddedSecretsTests", dependencies: ["EmbeddedSecrets", "EmbeddedSecretsGenerator", "Cipher", "TestSupport"], exclude: ["Vectors"],
                    swiftSettings: strict),
        .testTarget(name: "MigrationTests", dependencies: ["Migration", "Cipher", "Vault", "Keychain", "ProtectedFiles", "TestSupport"],
                    exclude: ["Fixtures"], swiftSettings: strict),
        // Replays the saved fuzzing cases (Tests/FuzzRegressionTests/Cases) through the fuzz
        // targets' entry points; the fuzzing itself is Fuzz/ and scripts/fuzz.
        .testTarget(name: "FuzzRegressionTests", dependencies: ["Age", "Cipher", "Keychain", "Vault", "Migration", "PinnedTLS",
                                                           "DeviceSharing", "UnlockAgent", "EmbeddedSecrets", "ProtectedFiles",
                                                           .product(name: "X509", package: "swift-certificates"),
                                                           .product(name: "SwiftASN1", package: "swift-asn1")] + crypto,
                    exclude: ["Cases"], swiftSettings: strict),
        // The tamper matrix of docs/SECURITY.md: a home with every feature, each file tampered
        // with in each way of the trust table, through the built `securefoundation`.
        .testTarget(name: "TamperMatrixTests", dependencies: ["SecureFoundationCLI", "TestSupport"], swiftSettings: strict),
        // Keys in a PKCS #11 token (SoftHSM2): the library in process, and the command line's TLS
        // server checked by openssl s_client, pkcs11-tool and a scan of its memory.
        .testTarget(name: "HardwareKeysTests", dependencies: ["HardwareKeys", "PinnedTLS", "DeviceSharing", "Keychain", "Vault", "Cipher",
                                                           "TestSupport", "SecureFoundationCLI",
                                                           .product(name: "X509", package: "swift-certificates"),
                                                           .product(name: "SwiftASN1", package: "swift-asn1")] + crypto,
                    swiftSettings: strict),
        .testTarget(name: "UnlockAgentTests", dependencies: ["UnlockAgent", "AgentWire", "Vault", "Cipher", "Keychain", "Age", "ProtectedFiles", "TestSupport",
                                                         "SecureFoundationServices",
                                                         .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                                                         .product(name: "Logging", package: "swift-log")], swiftSettings: strict),
            // Device-to-device sharing over mutual TLS (pulls SwiftNIO through PinnedTLS, so it stays
        // out of the umbrella).
        // DNS-SD for discovering the group's devices (internal to DeviceSharing).
        // Linux: libavahi-compat-libdnssd-dev (its header directory under /usr/include) to build,
        // libdns_sd.so.1 (libavahi-compat-libdnssd1), loaded at the first discovery call, to
        // discover; Apple platforms: the SDK and libSystem.
        .systemLibrary(name: "CDNSSD", providers: [.apt(["libavahi-compat-libdnssd-dev"])]),
        .target(
            name: "DeviceSharing",
            dependencies: [
                "PinnedTLS", "HardwareKeys", "ProtectedFiles", "Keychain", "Vault", "Cipher", "CDNSSD",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ] + crypto,
            swiftSettings: strict,
            // libdns_sd is loaded at the first discovery call (Sources/CDNSSD/shim.h), not linked.
            linkerSettings: [.linkedLibrary("dl", .when(platforms: [.linux]))]
        ),
        .testTarget(name: "DeviceSharingTests", dependencies: ["DeviceSharing", "TestSupport", "PinnedTLS", "ProtectedFiles", "Keychain", "Vault", "Cipher",
                                                             .product(name: "NIOCore", package: "swift-nio"),
                                                             .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                                                             .product(name: "NIOPosix", package: "swift-nio"),
                                                             .product(name: "X509", package: "swift-certificates"),
                                                             .product(name: "SwiftASN1", package: "swift-asn1")] + crypto,
                    swiftSettings: strict),
    ]
)
