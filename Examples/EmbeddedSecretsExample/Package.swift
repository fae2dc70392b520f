// swift-tools-version: 6.1
// An executable whose API token is sealed at build time by SecureFoundation's SecretsPlugin.
//   EXAMPLE_API_TOKEN=… swift build && .build/debug/EmbeddedSecretsExample
import PackageDescription

let package = Package(
    name: "EmbeddedSecretsExample",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "SecureFoundation", path: "../.."),
    ],
    targets: [
        .executableTarget(
            name: "EmbeddedSecretsExample",
            dependencies: [.product(name: "EmbeddedSecrets", package: "SecureFoundation")],
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "SecretsPlugin", package: "SecureFoundation")]
        ),
        // The same token sealed with a run-time share (EXAMPLE_SECRETS_SHARE at build and run time).
        .executableTarget(
            name: "EmbeddedSecretsShareExample",
            dependencies: [.product(name: "EmbeddedSecrets", package: "SecureFoundation")],
            swiftSettings: [.swiftLanguageMode(.v6)],
            plugins: [.plugin(name: "SecretsPlugin", package: "SecureFoundation")]
        ),
    ]
)
