// swift-tools-version: 6.1
// Coverage-guided fuzzing of every parser of SecureFoundation: one libFuzzer executable per
// parser, all calling the entry points of Tests/FuzzRegressionTests/FuzzHarness.swift (linked
// here as Sources/FuzzHarness). Build and run with ../scripts/fuzz; the build needs
//   swift build -c release --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address \
//       -Xswiftc -parse-as-library --scratch-path .build-fuzz
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

/// The fuzz targets: executable name and harness entry point (see scripts/fuzz).
let targets = [
    "FuzzAge", "FuzzArmor", "FuzzAgePayload", "FuzzSealed", "FuzzLegacyPlist", "FuzzLegacyCipher", "FuzzVaultState", "FuzzKeychainDB",
    "FuzzTlsPolicy", "FuzzTlsPEM", "FuzzTlsPin", "FuzzTlsPKCS12", "FuzzTlsCSR", "FuzzTlsRecord", "FuzzTlsCRL",
    "FuzzShareWire", "FuzzEnrolment", "FuzzAgentFrame", "FuzzEmbeddedSecrets", "FuzzProtectedKeys", "FuzzDeviceKey",
]

let package = Package(
    name: "SecureFoundationFuzz",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "SecureFoundation", path: ".."),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
    ],
    targets: [
        .target(
            name: "FuzzHarness",
            dependencies: ["Age", "Cipher", "Keychain", "Vault", "Migration", "PinnedTLS", "DeviceSharing", "UnlockAgent", "EmbeddedSecrets", "ProtectedFiles"].map { .product(name: $0, package: "SecureFoundation") }
                + [.product(name: "X509", package: "swift-certificates"), .product(name: "Crypto", package: "swift-crypto")],
            // A client of SecureFoundation: its `package` declarations are out of reach here.
            swiftSettings: strict + [.define("FUZZ_CLIENT")]
        ),
    ] + targets.map { .executableTarget(name: $0, dependencies: ["FuzzHarness"], swiftSettings: strict) }
)
