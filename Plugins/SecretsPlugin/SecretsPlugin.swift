import Foundation
import PackagePlugin

/// Seals the secrets a target's `secrets.json` declares into a generated Swift file.
///
/// Inputs: `secrets.json` in the target's directory, and the `.env` / `.env.<environment>` files
/// that exist in the target's directory or the package's root, so editing any of them rebuilds.
/// Values also come from the build's environment and `$CREDENTIALS_DIRECTORY`; SwiftPM does not
/// rebuild when only an environment variable changes (touch the manifest, or use a `.env` file).
/// The environment is `$SECUREFOUNDATION_SECRETS_ENVIRONMENT` (for `.env.<environment>` and
/// per-environment variable names).
@main
struct SecretsPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) async throws -> [Command] {
        guard let target = target as? any SourceModuleTarget else { return [] }
        let manifest = target.directoryURL.appending(path: "secrets.json")
        guard FileManager.default.fileExists(atPath: manifest.path) else {
            Diagnostics.error("\(target.name) uses SecretsPlugin but has no secrets.json in \(target.directoryURL.path)")
            return []
        }
        let environmentName = ProcessInfo.processInfo.environment["SECUREFOUNDATION_SECRETS_ENVIRONMENT"]
            .flatMap { $0.isEmpty ? nil : $0 }
        var envFiles = [URL]()
        for directory in [target.directoryURL, context.package.directoryURL] {
            var names = [".env"]
            if let environmentName { names.insert(".env." + environmentName, at: 0) }
            for name in names {
                let file = directory.appending(path: name)
                if FileManager.default.fileExists(atPath: file.path), !envFiles.contains(file) { envFiles.append(file) }
            }
        }
        let output = context.pluginWorkDirectoryURL.appending(path: "\(target.name)EmbeddedSecrets.swift")
        var arguments = ["--manifest", manifest.path, "--output", output.path]
        for file in envFiles { arguments += ["--env-file", file.path] }
        if let environmentName { arguments += ["--environment", environmentName] }
        let tool = try context.tool(named: "EmbeddedSecretsGeneratorTool")
        return [
            .buildCommand(
                displayName: "Sealing embedded secrets for \(target.name)",
                executable: tool.url,
                arguments: arguments,
                inputFiles: [manifest] + envFiles,
                outputFiles: [output]
            ),
        ]
    }
}
