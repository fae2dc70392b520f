import Foundation
import X509

/// A trust policy read from a JSON file.
///
/// ```json
/// {
///   "version": 1,
///   "defaultAnchors": { "system": true },
///   "hosts": [
///     { "pattern": "api.example.com",
///       "anchors": { "system": false, "files": ["ca.pem"], "keychain": ["corp-ca"],
///                    "revocationList": "crl.pem" },
///       "pins": ["sha256/…", "sha256/…"],
///       "expires": "2027-06-30",
///       "mode": "enforce" }
///   ],
///   "reports": { "file": "pin-reports.jsonl", "minimumIntervalSeconds": 86400 },
///   "debugOverrides": { "anchors": { "files": ["debug-ca.pem"] }, "overridePins": true }
/// }
/// ```
///
/// Relative file names are taken from the configuration's directory. `debugOverrides` is
/// ignored unless the environment variable ``debugEnvironmentVariable`` is `1`.
public struct PolicyConfiguration: Sendable {
    /// The only version this parser reads.
    package static let currentVersion = 1
    /// Set to `1` to honour `debugOverrides`.
    public static let debugEnvironmentVariable = "SECUREFOUNDATION_TLS_DEBUG_OVERRIDES"

    /// One `hosts` entry as written (for lint), with its parsed policy.
    public struct Entry: Sendable {
        public let pattern: HostPattern
        public let anchors: TrustAnchors
        /// The pins as parsed, also when the entry's mode would have refused too few.
        public let pins: [SPKIPin]
        public let expires: Date?
        public let mode: PinSet.Mode
    }

    /// The entries, in file order.
    public let entries: [Entry]
    /// Anchors for hosts without an entry; `nil` refuses them.
    public let defaultAnchors: TrustAnchors?
    /// Where pin reports are appended, if configured.
    public let reportFile: String?
    /// Identical reports within this interval are dropped.
    public let reportInterval: TimeInterval
    /// Whether `debugOverrides` was present and honoured.
    public let debugOverridesApplied: Bool

    /// The policy. `anchorSource` resolves `keychain` anchors; a report file, if configured,
    /// gets a reporter unless `reporter` is given.
    /// - Parameters:
    ///   - anchorSource: resolves `keychain` anchors (nil: none).
    ///   - reporter: the pin reporter; nil: one appending to ``reportFile`` when it is configured.
    /// - Returns: the trust policy of the configuration's hosts and default anchors.
    /// - Throws: ``PinnedTLSError/invalidConfiguration(_:)`` for a host enforcing fewer than two
    ///   pins, ``PinnedTLSError/io(path:detail:)`` when the report file's directory cannot be created.
    public func policy(anchorSource: (any AnchorSource)? = nil, reporter: PinReporter? = nil)
        throws(PinnedTLSError) -> TrustPolicy
    {
        var hosts: [HostPolicy] = []
        for entry in entries {
            var pins: PinSet?
            if !entry.pins.isEmpty {
                pins = try PinSet(pins: entry.pins, expires: entry.expires, mode: entry.mode)
            }
            hosts.append(HostPolicy(pattern: entry.pattern, anchors: entry.anchors, pins: pins))
        }
        var reporter = reporter
        if reporter == nil, let reportFile {
            reporter = try PinReportFileSink(path: reportFile).reporter(minimumInterval: reportInterval)
        }
        return TrustPolicy(hosts: hosts, defaultAnchors: defaultAnchors, anchorSource: anchorSource, reporter: reporter)
    }

    /// The largest configuration file read.
    package static let maximumLength = 1 << 20

    /// Reads and parses a configuration file. The configuration and every file it names
    /// (anchor certificates) must be regular files of at most 1 MiB: a FIFO or a device is
    /// refused before it is read.
    ///
    /// - Throws: ``PinnedTLSError/invalidConfiguration(_:)`` listing every problem found (one
    ///   per line, each with its place in the file, a named file that is not a regular file
    ///   included); for the configuration file itself ``PinnedTLSError/notARegularFile(path:kind:)``,
    ///   ``PinnedTLSError/fileTooLarge(path:limit:)`` or ``PinnedTLSError/io(path:detail:)``.
    /// - Parameters:
    ///   - path: the configuration file.
    ///   - environment: decides whether `debugOverrides` applies.
    /// - Returns: the configuration.
    public static func load(
        path: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(PinnedTLSError) -> PolicyConfiguration {
        let data = Data(try RegularFile.contents(path, maxLength: maximumLength))
        let base = (path as NSString).deletingLastPathComponent
        return try parse(data, name: path, baseDirectory: base.isEmpty ? "." : base, environment: environment)
    }

    /// Parses a configuration.
    ///
    /// - Parameters:
    ///   - data: the JSON text.
    ///   - name: the file's name, for messages.
    ///   - baseDirectory: where relative certificate and report files are.
    ///   - environment: decides whether `debugOverrides` applies.
    /// - Returns: the configuration.
    /// - Throws: ``PinnedTLSError/invalidConfiguration(_:)`` for text that is not JSON or lists
    ///   problems, one per line.
    public static func parse(
        _ data: Data, name: String = "configuration", baseDirectory: String = ".",
        environment: [String: String] = [:]
    ) throws(PinnedTLSError) -> PolicyConfiguration {
        let root: JSONValue
        do {
            root = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            throw .invalidConfiguration("\(name): not valid JSON (\(Self.describe(error)))")
        }
        var parser = Parser(name: name, base: baseDirectory)
        let result = parser.configuration(root, environment: environment)
        if !parser.issues.isEmpty {
            throw .invalidConfiguration(parser.issues.joined(separator: "\n"))
        }
        guard let result else { throw .invalidConfiguration("\(name): unreadable") }
        return result
    }

    private static func describe(_ error: any Error) -> String {
        if case DecodingError.dataCorrupted(let context) = error {
            return context.underlyingError.map { "\($0.localizedDescription)" } ?? context.debugDescription
        }
        return "\(error)"
    }
}

/// Any JSON value, decoded strictly (a number is never a boolean).
enum JSONValue: Decodable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    var kind: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

private struct Parser {
    let name: String
    let base: String
    var issues: [String] = []

    init(name: String, base: String) {
        self.name = name
        self.base = base
    }

    mutating func issue(_ path: String, _ text: String) {
        issues.append("\(name): \(path): \(text)")
    }

    mutating func object(_ value: JSONValue, _ path: String, allowed: Set<String>) -> [String: JSONValue]? {
        guard case .object(let object) = value else {
            issue(path, "expected an object, found \(value.kind)")
            return nil
        }
        for key in object.keys.sorted() where !allowed.contains(key) {
            issue(path, "unknown key \"\(key)\" (known: \(allowed.sorted().joined(separator: ", ")))")
        }
        return object
    }

    mutating func strings(_ value: JSONValue?, _ path: String) -> [String] {
        guard let value else { return [] }
        guard case .array(let items) = value else {
            issue(path, "expected an array of strings, found \(value.kind)")
            return []
        }
        var result: [String] = []
        for (index, item) in items.enumerated() {
            if case .string(let text) = item { result.append(text) } else {
                issue("\(path)[\(index)]", "expected a string, found \(item.kind)")
            }
        }
        return result
    }

    mutating func bool(_ value: JSONValue?, _ path: String, default fallback: Bool) -> Bool {
        guard let value else { return fallback }
        guard case .bool(let flag) = value else {
            issue(path, "expected true or false, found \(value.kind)")
            return fallback
        }
        return flag
    }

    func resolve(_ file: String) -> String {
        file.hasPrefix("/") ? file : (base as NSString).appendingPathComponent(file)
    }

    mutating func anchors(_ value: JSONValue?, _ path: String, default fallback: TrustAnchors) -> TrustAnchors {
        guard let value else { return fallback }
        guard let object = object(value, path, allowed: ["system", "files", "keychain", "revocationList"]) else { return fallback }
        var certificates: [Certificate] = []
        for (index, file) in strings(object["files"], path + ".files").enumerated() {
            do {
                certificates += try PEMFiles.certificates(atPath: resolve(file))
            } catch {
                issue("\(path).files[\(index)]", "\(error)")
            }
        }
        let anchors = TrustAnchors(
            system: bool(object["system"], path + ".system", default: false),
            certificates: certificates,
            keychainLabels: strings(object["keychain"], path + ".keychain"),
            revocationList: revocationList(object["revocationList"], path + ".revocationList"))
        if anchors.isEmpty {
            issue(path, "no anchors: set \"system\": true, or list \"files\" or \"keychain\" labels")
        }
        if anchors.revocationList != nil, anchors.certificates.isEmpty, anchors.keychainLabels.isEmpty {
            issue(path + ".revocationList", "a revocation list needs the CA it belongs to among the \"files\" or \"keychain\" anchors")
        }
        return anchors
    }

    /// The file a `revocationList` names (relative to the configuration's directory); it is
    /// read at handshakes, not here.
    mutating func revocationList(_ value: JSONValue?, _ path: String) -> String? {
        guard let value else { return nil }
        guard case .string(let file) = value, !file.isEmpty else {
            issue(path, "expected a file name (the CA's revocation list, from `securefoundation tls crl`), found \(value.kind)")
            return nil
        }
        return resolve(file)
    }

    mutating func date(_ value: JSONValue?, _ path: String) -> Date? {
        guard let value else { return nil }
        guard case .string(let text) = value else {
            issue(path, "expected a date (\"2027-06-30\" or \"2027-06-30T12:00:00Z\"), found \(value.kind)")
            return nil
        }
        let full = ISO8601DateFormatter()
        if let date = full.date(from: text) { return date }
        let day = ISO8601DateFormatter()
        day.formatOptions = [.withFullDate]
        if let date = day.date(from: text) { return date }
        issue(path, "\"\(text)\" is not a date (write 2027-06-30 or 2027-06-30T12:00:00Z)")
        return nil
    }

    mutating func entry(_ value: JSONValue, _ path: String, extraAnchors: TrustAnchors?, overridePins: Bool)
        -> PolicyConfiguration.Entry?
    {
        guard let object = object(value, path, allowed: ["pattern", "anchors", "pins", "expires", "mode"]) else {
            return nil
        }
        var pattern: HostPattern?
        if case .string(let text)? = object["pattern"] {
            do { pattern = try HostPattern(text) } catch { issue(path + ".pattern", error.description) }
        } else {
            issue(path + ".pattern", "required: a host name, *.domain or **.domain")
        }
        var anchors = self.anchors(object["anchors"], path + ".anchors", default: .systemRoots)
        if let extraAnchors {
            anchors.system = anchors.system || extraAnchors.system
            anchors.certificates += extraAnchors.certificates
            anchors.keychainLabels += extraAnchors.keychainLabels
        }
        var pins: [SPKIPin] = []
        for (index, text) in strings(object["pins"], path + ".pins").enumerated() {
            if let pin = SPKIPin(text) {
                if pins.contains(pin) { issue("\(path).pins[\(index)]", "duplicate pin \(text)") }
                pins.append(pin)
            } else {
                issue("\(path).pins[\(index)]",
                      "\"\(text)\" is not a pin: write sha256/ followed by the base64 of 32 bytes (see `securefoundation tls pin`)")
            }
        }
        var mode = PinSet.Mode.enforce
        if let value = object["mode"] {
            if case .string(let text) = value, let parsed = PinSet.Mode(rawValue: text) {
                mode = parsed
            } else {
                issue(path + ".mode", "expected \"enforce\" or \"report\"")
            }
        }
        let expires = date(object["expires"], path + ".expires")
        if object["pins"] != nil && mode == .enforce && Set(pins).count < 2 {
            issue(path + ".pins", "enforcing needs at least two pins (the live key and a backup key), found \(Set(pins).count)")
        }
        if expires != nil && pins.isEmpty { issue(path + ".expires", "an expiry without pins") }
        if overridePins { pins = [] }
        guard let pattern else { return nil }
        return PolicyConfiguration.Entry(pattern: pattern, anchors: anchors, pins: pins, expires: expires, mode: mode)
    }

    mutating func configuration(_ root: JSONValue, environment: [String: String]) -> PolicyConfiguration? {
        guard let object = object(root, "top level",
                                  allowed: ["version", "defaultAnchors", "hosts", "reports", "debugOverrides"])
        else { return nil }
        switch object["version"] {
        case .number(let version)? where version == Double(PolicyConfiguration.currentVersion):
            break
        case .number(let version)?:
            let shown = version.rounded() == version && abs(version) < 1e9 ? String(Int(version)) : String(version)
            issue("version", "unknown version \(shown); this parser reads version \(PolicyConfiguration.currentVersion)")
            return nil
        case let other?:
            issue("version", "expected the number \(PolicyConfiguration.currentVersion), found \(other.kind)")
            return nil
        case nil:
            issue("version", "required (\"version\": \(PolicyConfiguration.currentVersion))")
            return nil
        }
        // debugOverrides: parsed always (so mistakes show), applied only when asked for.
        var extraAnchors: TrustAnchors?
        var overridePins = false
        var debugApplied = false
        if let debug = object["debugOverrides"],
           let fields = self.object(debug, "debugOverrides", allowed: ["anchors", "overridePins"])
        {
            let anchors = self.anchors(fields["anchors"], "debugOverrides.anchors", default: TrustAnchors())
            let override = bool(fields["overridePins"], "debugOverrides.overridePins", default: false)
            if environment[PolicyConfiguration.debugEnvironmentVariable] == "1" {
                extraAnchors = anchors
                overridePins = override
                debugApplied = true
            }
        }
        var defaultAnchors: TrustAnchors?
        switch object["defaultAnchors"] {
        case nil: defaultAnchors = nil
        case .null?: defaultAnchors = nil
        case let value?: defaultAnchors = anchors(value, "defaultAnchors", default: TrustAnchors())
        }
        if var anchors = defaultAnchors, let extraAnchors {
            anchors.certificates += extraAnchors.certificates
            anchors.keychainLabels += extraAnchors.keychainLabels
            defaultAnchors = anchors
        }
        var entries: [PolicyConfiguration.Entry] = []
        if let hosts = object["hosts"] {
            if case .array(let items) = hosts {
                for (index, item) in items.enumerated() {
                    if let entry = entry(item, "hosts[\(index)]", extraAnchors: extraAnchors, overridePins: overridePins) {
                        if entries.contains(where: { $0.pattern == entry.pattern }) {
                            issue("hosts[\(index)].pattern", "\(entry.pattern) appears twice")
                        }
                        entries.append(entry)
                    }
                }
            } else {
                issue("hosts", "expected an array, found \(hosts.kind)")
            }
        }
        var reportFile: String?
        var interval: TimeInterval = 24 * 60 * 60
        if let reports = object["reports"],
           let fields = self.object(reports, "reports", allowed: ["file", "minimumIntervalSeconds"])
        {
            if case .string(let file)? = fields["file"] { reportFile = resolve(file) } else if fields["file"] != nil {
                issue("reports.file", "expected a file name")
            }
            if let value = fields["minimumIntervalSeconds"] {
                if case .number(let seconds) = value, seconds >= 0, seconds <= 366 * 86_400 { interval = seconds } else {
                    issue("reports.minimumIntervalSeconds", "expected a number of seconds between 0 and one year")
                }
            }
        }
        return PolicyConfiguration(entries: entries, defaultAnchors: defaultAnchors, reportFile: reportFile,
                                   reportInterval: interval, debugOverridesApplied: debugApplied)
    }
}
