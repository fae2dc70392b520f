import Cipher
import Foundation
import NIOConcurrencyHelpers
import SwiftASN1
import X509

/// A pin validation report, with TrustKit's field names so that an existing report collector
/// accepts it. Two fields are added: `reason` (a ``TLSTrustError/Reason/code`` or
/// `pin-set-expired`) and `pin-set-expired`.
public struct PinValidationReport: Sendable, Codable, Equatable {
    /// TrustKit's `validation-result` values.
    public enum ValidationResult: Int, Sendable, Codable {
        case success = 0
        case failedNoMatchingPin = 1
        case failedInvalidCertificateChain = 2
        case errorInvalidParameters = 3
        case failedUserDefinedTrustDecision = 4
        case errorCouldNotGenerateSpkiHash = 5
    }

    public var appBundleID: String
    public var appVersion: String
    public var appPlatform: String
    public var hostname: String
    public var port: Int
    public var notedHostname: String
    public var includeSubdomains: Bool
    public var enforcePinning: Bool
    /// PEM, leaf first: the chain validation built (leaf to anchor); empty when validation
    /// failed (TrustKit's meaning: a chain that was not validated is never filed here).
    public var validatedCertificateChain: [String]
    /// PEM, leaf first: the certificates the server presented, as it sent them.
    public var servedCertificateChain: [String] = []
    /// ISO 8601.
    public var dateTime: String
    /// `pin-sha256="<base64>"`, as TrustKit writes them.
    public var knownPins: [String]
    public var validationResult: ValidationResult
    public var reason: String
    public var pinSetExpired: Bool

    enum CodingKeys: String, CodingKey {
        case appBundleID = "app-bundle-id"
        case appVersion = "app-version"
        case appPlatform = "app-platform"
        case hostname
        case port
        case notedHostname = "noted-hostname"
        case includeSubdomains = "include-subdomains"
        case enforcePinning = "enforce-pinning"
        case validatedCertificateChain = "validated-certificate-chain"
        case servedCertificateChain = "served-certificate-chain"
        case dateTime = "date-time"
        case knownPins = "known-pins"
        case validationResult = "validation-result"
        case reason
        case pinSetExpired = "pin-set-expired"
    }

    /// The report as one line of JSON (keys sorted).
    /// - Returns: the JSON object, keys sorted, without a line break.
    public func jsonLine() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(self), let text = String(data: data, encoding: .utf8) else {
            return "{}"
        }
        return text
    }

    /// What identifies a report for rate limiting: everything but the time.
    var rateLimitKey: String {
        var copy = self
        copy.dateTime = ""
        return copy.jsonLine()
    }
}

/// Delivers reports to a handler, dropping a report identical (but for its time) to one
/// delivered within ``minimumInterval`` (TrustKit's rate limiting; default one day).
public final class PinReporter: Sendable {
    private let handler: @Sendable (PinValidationReport) -> Void
    private let state = NIOLockedValueBox<[String: Date]>([:])
    /// Identical reports within this interval are dropped.
    public let minimumInterval: TimeInterval
    /// The application's identifier in reports.
    public let appBundleID: String
    /// The application's version in reports.
    public let appVersion: String
    /// At most this many distinct reports are remembered; beyond, the oldest are forgotten.
    static let memoryLimit = 1024

    /// A reporter that hands reports to `handler`.
    /// - Parameters:
    ///   - appBundleID: the application's identifier in reports.
    ///   - appVersion: the application's version in reports.
    ///   - minimumInterval: an identical report is delivered at most once in this many seconds.
    ///   - handler: receives each report delivered.
    public init(
        appBundleID: String = "securefoundation",
        appVersion: String = "1",
        minimumInterval: TimeInterval = 24 * 60 * 60,
        handler: @escaping @Sendable (PinValidationReport) -> Void
    ) {
        self.appBundleID = appBundleID
        self.appVersion = appVersion
        self.minimumInterval = minimumInterval
        self.handler = handler
    }

    /// Hands `report` to the handler unless an identical one was delivered recently.
    ///
    /// - Parameters:
    ///   - report: the report.
    ///   - now: the current time, for the rate limit.
    /// - Returns: whether it was delivered.
    @discardableResult
    public func submit(_ report: PinValidationReport, now: Date = Date()) -> Bool {
        let key = report.rateLimitKey
        let deliver = state.withLockedValue { seen -> Bool in
            if let last = seen[key], now.timeIntervalSince(last) < minimumInterval, now >= last {
                return false
            }
            if seen.count >= Self.memoryLimit {
                let cutoff = now.addingTimeInterval(-minimumInterval)
                seen = seen.filter { $0.value > cutoff }
                if seen.count >= Self.memoryLimit {
                    let oldest = seen.sorted { $0.value < $1.value }.prefix(seen.count / 2).map(\.key)
                    for key in oldest { seen.removeValue(forKey: key) }
                }
            }
            seen[key] = now
            return true
        }
        if deliver { handler(report) }
        return deliver
    }

    /// - Parameters:
    ///   - served: the certificates the server presented.
    ///   - validated: the validated chain; empty when validation failed.
    func makeReport(
        host: String, port: Int, entry: HostPolicy, served: [Certificate], validated: [Certificate],
        result: PinValidationReport.ValidationResult, reason: String, pinSetExpired: Bool, now: Date
    ) -> PinValidationReport {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        let pins = entry.pins?.pins ?? []
        return PinValidationReport(
            appBundleID: appBundleID,
            appVersion: appVersion,
            appPlatform: Self.platform,
            hostname: host,
            port: port,
            notedHostname: entry.pattern.domain,
            includeSubdomains: entry.pattern.kind != .exact,
            enforcePinning: entry.pins?.mode == .enforce,
            validatedCertificateChain: validated.compactMap { try? $0.serializeAsPEM().pemString },
            servedCertificateChain: served.compactMap { try? $0.serializeAsPEM().pemString },
            dateTime: formatter.string(from: now),
            knownPins: pins.map { "pin-sha256=\"\(Data($0.digest).base64EncodedString())\"" },
            validationResult: result,
            reason: reason,
            pinSetExpired: pinSetExpired)
    }

    static var platform: String {
        #if os(Linux)
        return "LINUX"
        #elseif os(macOS)
        return "MACOS"
        #else
        return "IOS"
        #endif
    }
}

/// Appends reports, one JSON line each, to a file created 0600 (its directory 0700).
public struct PinReportFileSink: Sendable {
    /// The file reports are appended to.
    public let path: String

    /// Prepares the sink; creates the directory (0700) if missing.
    ///
    /// - Throws: ``PinnedTLSError/io(path:detail:)`` when the directory cannot be created.
    /// - Parameter path: the file reports are appended to.
    public init(path: String) throws(PinnedTLSError) {
        self.path = path
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty && !FileManager.default.fileExists(atPath: directory) {
            do {
                try FileManager.default.createDirectory(
                    atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw .io(path: directory, detail: "\(error)")
            }
        }
    }

    /// Appends one report as a line, with a single write, then fsync. Only to a regular file
    /// (or a new one): a FIFO or a device there is refused.
    ///
    /// - Throws: ``PinnedTLSError/io(path:detail:)``, ``PinnedTLSError/notARegularFile(path:kind:)``.
    /// - Parameter report: the report, written by ``PinValidationReport/jsonLine()``.
    public func append(_ report: PinValidationReport) throws(PinnedTLSError) {
        let line = Array((report.jsonLine() + "\n").utf8)
        // Without blocking: a FIFO there would hold the handshake until someone reads it.
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0o600)
        guard fd >= 0 else {
            let detail = String(cString: strerror(errno))
            // A FIFO without a reader fails with ENXIO: say what it is.
            if let status = try? FileCalls.linkStatus(path), !status.isRegularFile {
                throw .notARegularFile(path: path, kind: RegularFile.kind(status.kind))
            }
            throw .io(path: path, detail: detail)
        }
        defer { close(fd) }
        let status: FileStatus
        do throws(SystemCallError) { status = try FileCalls.status(fd) } catch { throw .io(path: path, detail: String(cString: strerror(error.code))) }
        guard status.isRegularFile else {
            throw .notARegularFile(path: path, kind: RegularFile.kind(status.kind))
        }
        let written = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == line.count else {
            throw .io(path: path, detail: written < 0 ? String(cString: strerror(errno)) : "short write")
        }
        try? FileCalls.sync(fd)
    }

    /// A reporter whose handler appends to this file; write errors go to `onError`.
    /// - Parameters:
    ///   - minimumInterval: an identical report is appended at most once in this many seconds.
    ///   - onError: told each error of ``append(_:)``.
    /// - Returns: the reporter.
    public func reporter(
        minimumInterval: TimeInterval = 24 * 60 * 60,
        onError: @escaping @Sendable (PinnedTLSError) -> Void = { _ in }
    ) -> PinReporter {
        let sink = self
        return PinReporter(minimumInterval: minimumInterval) { report in
            do {
                try sink.append(report)
            } catch let error as PinnedTLSError {
                onError(error)
            } catch {
                onError(.io(path: sink.path, detail: "\(error)"))
            }
        }
    }
}
