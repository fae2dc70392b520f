import Foundation
import TestSupport
import Testing
import X509
@testable import PinnedTLS
import NIOConcurrencyHelpers

/// Files a policy, a command or a configuration names are read only when they are regular
/// files, and only up to a bound: a FIFO must not block, a device must not be read.
@Suite("Files named by a policy")
final class NamedFilesTests {
    let scratch: TemporaryDirectory
    var directory: String { scratch.path }

    init() throws {
        scratch = try TemporaryDirectory(prefix: "pinnedtls-files")
    }

    func fifo(_ name: String) throws -> String {
        let path = directory + "/" + name
        guard mkfifo(path, 0o600) == 0 else { throw TestFailure("mkfifo \(path): \(String(cString: strerror(errno)))") }
        return path
    }

    @Test("A policy file that is a FIFO is refused at once instead of blocking forever")
    func policyFIFO() throws {
        let path = try fifo("policy.json")
        let failure = bounded(fifo: path) {
            thrown { _ = try PolicyConfiguration.load(path: path, environment: [:]) }
        }
        #expect(failure == .notARegularFile(path: path, kind: "a FIFO"))
    }

    @Test("/dev/zero as the policy file is refused as a character device, without reading it")
    func policyDevZero() {
        let failure = bounded(fifo: nil) {
            thrown { _ = try PolicyConfiguration.load(path: "/dev/zero", environment: [:]) }
        }
        #expect(failure == .notARegularFile(path: "/dev/zero", kind: "a character device"))
    }

    @Test("Anchor files a policy names: a FIFO and /dev/zero are refused, each with its place and path")
    func anchorFilesFIFOAndDevZero() throws {
        let anchor = try fifo("anchor.pem")
        let policy = directory + "/policy.json"
        try """
            {"version": 1, "defaultAnchors": {"files": ["/dev/zero"]},
             "hosts": [{"pattern": "api.example.com", "anchors": {"files": ["anchor.pem"]}}]}
            """.write(toFile: policy, atomically: true, encoding: .utf8)
        let failure = bounded(fifo: anchor) {
            thrown { _ = try PolicyConfiguration.load(path: policy, environment: [:]) }
        }
        guard case .invalidConfiguration(let text)? = failure else {
            Issue.record("expected invalidConfiguration, got \(String(describing: failure))")
            return
        }
        #expect(text.contains("\(policy): hosts[0].anchors.files[0]: \(anchor) is a FIFO, not a regular file"))
        #expect(text.contains("\(policy): defaultAnchors.files[0]: /dev/zero is a character device, not a regular file"))
    }

    @Test("Files over the bound are refused: a policy over 1 MiB, a certificate file over 1 MiB")
    func tooLarge() throws {
        let big = directory + "/big.json"
        try Data(repeating: 0x20, count: (1 << 20) + 1).write(to: URL(fileURLWithPath: big))
        #expect(thrown { _ = try PolicyConfiguration.load(path: big, environment: [:]) }
                == .fileTooLarge(path: big, limit: 1 << 20))
        #expect(thrown { _ = try PEMFiles.certificates(atPath: big) } == .fileTooLarge(path: big, limit: 1 << 20))
        let directoryError = thrown { _ = try PEMFiles.certificates(atPath: directory) }
        #expect(directoryError == .notARegularFile(path: directory, kind: "a directory"))
    }

    @Test("Certificate and key files that are FIFOs are refused (tls serve --cert/--key, --ca, --client-ca)")
    func certificateAndKeyFIFO() throws {
        let certificate = try fifo("cert.pem")
        let key = try fifo("key.pem")
        #expect(bounded(fifo: certificate) { thrown { _ = try PEMFiles.certificates(atPath: certificate) } }
                == .notARegularFile(path: certificate, kind: "a FIFO"))
        #expect(bounded(fifo: key) { thrown { _ = try PEMFiles.privateKey(atPath: key) } }
                == .notARegularFile(path: key, kind: "a FIFO"))
        #expect(thrown { _ = try PEMFiles.privateKey(atPath: "/dev/zero") }
                == .notARegularFile(path: "/dev/zero", kind: "a character device"))
    }

    @Test("A report file that is a FIFO is refused instead of holding the handshake")
    func reportFIFO() throws {
        let path = try fifo("reports.jsonl")
        let report = PinValidationReport(
            appBundleID: "a", appVersion: "1", appPlatform: "LINUX", hostname: "h", port: 443, notedHostname: "h",
            includeSubdomains: false, enforcePinning: true, validatedCertificateChain: [], dateTime: "t",
            knownPins: [], validationResult: .failedNoMatchingPin, reason: "no-pin-matched", pinSetExpired: false)
        let sink = try PinReportFileSink(path: path)
        #expect(bounded(fifo: path) { thrown { try sink.append(report) } } == .notARegularFile(path: path, kind: "a FIFO"))
        // A regular file still receives the line.
        let file = directory + "/reports-ok.jsonl"
        try PinReportFileSink(path: file).append(report)
        #expect(try String(contentsOfFile: file, encoding: .utf8).hasSuffix("\n"))
    }

    @Test("One PEM reader: anchor files get the identity reader's errors (a truncated file says so)")
    func onePEMReader() throws {
        let pem = """
            -----BEGIN CERTIFICATE-----
            MIIBszCCAVmgAwIBAgIUQ
            """
        guard case .invalidIdentity(let text)? = thrown({ _ = try PEMFiles.certificates(pem: pem, name: "ca.pem") }) else {
            Issue.record("a truncated PEM file was not refused")
            return
        }
        #expect(text.hasPrefix("ca.pem: "))
        #expect(text.contains("truncated"))
    }

    @Test("The system's CA bundle (over 64 certificates) reads as anchors",
          .enabled(if: FileManager.default.fileExists(atPath: "/etc/ssl/certs/ca-certificates.crt"),
                   "no /etc/ssl/certs/ca-certificates.crt"))
    func systemBundle() throws {
        let bundle = "/etc/ssl/certs/ca-certificates.crt"
        let certificates = try PEMFiles.certificates(atPath: bundle)
        let text = try String(contentsOfFile: bundle, encoding: .utf8)
        #expect(certificates.count == text.components(separatedBy: "-----BEGIN CERTIFICATE-----").count - 1)
    }
}

/// Runs `body` on a thread of its own. If it has not returned after 30 s (blocked on the
/// FIFO), the FIFO is opened from both sides until it returns, and the test fails.
private func bounded(fifo: String?, _ body: @escaping @Sendable () -> PinnedTLSError?) -> PinnedTLSError? {
    let done = DispatchSemaphore(value: 0)
    let result = NIOLockedValueBox<PinnedTLSError?>(nil)
    Thread {
        result.withLockedValue { $0 = body() }
        done.signal()
    }.start()
    if done.wait(timeout: .now() + 30) == .timedOut {
        Issue.record("still blocked after 30 s")
        if let fifo {
            for _ in 0..<300 {
                let reader = open(fifo, O_RDONLY | O_NONBLOCK)
                let writer = open(fifo, O_WRONLY | O_NONBLOCK)
                usleep(10_000)
                if reader >= 0 { close(reader) }
                if writer >= 0 { close(writer) }
                if done.wait(timeout: .now() + 0.1) == .success { break }
            }
        }
        return nil
    }
    return result.withLockedValue { $0 }
}

/// The error `body` throws (another error than ``PinnedTLSError`` comes back as an `io`
/// case naming it, so that the expectation fails).
private func thrown(_ body: () throws -> Void) -> PinnedTLSError? {
    do {
        try body()
        return nil
    } catch let error as PinnedTLSError {
        return error
    } catch {
        return .io(path: "unexpected error", detail: "\(error)")
    }
}
