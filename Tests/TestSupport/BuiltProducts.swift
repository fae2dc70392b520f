import Foundation

/// The executables `swift build --build-tests` wrote beside the test bundle
/// (`.build/<triple>/<configuration>/`): the `securefoundation` command line and the helper
/// processes tests start. One way to find them for every test target, whatever the build
/// directory, triple or configuration.
public enum BuiltProducts {
    /// A product that was not built.
    public struct Missing: Error, CustomStringConvertible {
        public let name: String
        public let searched: [String]
        public var description: String {
            "\(name) was not built (run `swift build --build-tests`); searched \(searched.joined(separator: ", "))"
        }
    }

    /// The directories searched, nearest first: the running test bundle's directory and its
    /// parents (a bundle can sit in a subdirectory of the products directory).
    public static var directories: [String] {
        var result: [String] = []
        for start in [URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath(),
                      Bundle.main.bundleURL.resolvingSymlinksInPath()] {
            var directory = start.deletingLastPathComponent()
            for _ in 0..<4 {
                if !result.contains(directory.path) { result.append(directory.path) }
                directory = directory.deletingLastPathComponent()
            }
        }
        return result
    }

    /// The path of the built executable `name`, or nil when it was not built.
    /// - Parameter environment: a variable that, when set, names the executable instead (for
    ///   example `SECUREFOUNDATION_BIN`, to test an installed binary).
    public static func path(of name: String, environment: String? = nil) -> String? {
        if let environment, let override = ProcessInfo.processInfo.environment[environment], !override.isEmpty {
            return override
        }
        return directories.lazy.map { $0 + "/" + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The path of the built executable `name`.
    /// - Throws: ``Missing`` when it was not built.
    public static func executable(_ name: String, environment: String? = nil) throws -> String {
        guard let path = path(of: name, environment: environment) else {
            throw Missing(name: name, searched: directories)
        }
        return path
    }

    /// The `securefoundation` command line (`$SECUREFOUNDATION_BIN` when set).
    public static var commandLine: String {
        get throws { try executable("securefoundation", environment: "SECUREFOUNDATION_BIN") }
    }
}
