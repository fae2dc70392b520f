import Foundation
import EmbeddedSecretsGenerator

// The program the SecretsPlugin build-tool plugin runs:
//   embedded-secrets-generator --manifest PATH --output PATH [--env-file PATH]... [--environment NAME]
// Values come from this process's environment, the --env-file files (first match wins) and
// $CREDENTIALS_DIRECTORY. On failure it prints the secret's name (never its value) and exits 1.

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("error: embedded secrets: \(message)\n".utf8))
    exit(1)
}

var manifestPath: String?
var outputPath: String?
var envFiles = [String]()
var environmentName = ProcessInfo.processInfo.environment["SECUREFOUNDATION_SECRETS_ENVIRONMENT"]
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    guard let value = arguments.popFirst() else { fail("\(argument) needs a value") }
    switch argument {
    case "--manifest": manifestPath = value
    case "--output": outputPath = value
    case "--env-file": envFiles.append(value)
    case "--environment": environmentName = value.isEmpty ? nil : value
    default: fail("unknown option \(argument)")
    }
}
guard let manifestPath, let outputPath else {
    fail("usage: embedded-secrets-generator --manifest PATH --output PATH [--env-file PATH]... [--environment NAME]")
}
do {
    let manifest = try SecretsManifest.load(path: manifestPath)
    var files = envFiles
    if let environmentName {
        // .env.<environment> before .env, whatever order the files were given in.
        files.sort { a, b in a.hasSuffix("/.env." + environmentName) && !b.hasSuffix("/.env." + environmentName) }
    }
    let environment = ProcessInfo.processInfo.environment
    let sources = SecretValueSources(environment: environment, envFiles: files,
                                     credentialsDirectory: environment["CREDENTIALS_DIRECTORY"].flatMap { $0.isEmpty ? nil : $0 },
                                     environmentName: environmentName)
    let output = try SecretsGenerator.generate(manifest: manifest, sources: sources,
                                               manifestName: URL(fileURLWithPath: manifestPath).lastPathComponent)
    try SecretsGenerator.write(output, to: outputPath)
} catch {
    fail(String(describing: error))
}
