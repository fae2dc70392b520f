import AgeCommandLine
import ArgumentParser
import DeviceSharing
import Foundation
import PinnedTLS
import SecureFoundation

struct ShareServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Receive files from the group's devices over mutual TLS into the inbox.",
        discussion: """
        Loads this device's identity (needs --passcode-file), then locks the vault again (unless \
        --stay-unlocked): files keep arriving as protected files of class completeUnlessOpen, \
        readable only after an unlock. Prints `listening on HOST:PORT` once ready, one line per \
        file received, and refusals on stderr; on a terminal, standard error shows each file's \
        progress while it arrives. With --advertise, the service is announced by DNS-SD \
        (_securefoundation._tcp in local.; TXT v=1 and the group's tag only, the device name \
        only with --advertise-name). A device revoked with `share revoke` is refused \
        from its next connection; on the machine that holds the group root, so is a device not \
        enrolled there.

        Examples:
          securefoundation share serve --listen 0.0.0.0:7443 --passcode-file pass.txt
          securefoundation share serve --listen 0.0.0.0:7443 --advertise \\
              --passcode-file pass.txt
        """
    )

    @Option(name: .customLong("inbox"), help: "Where received files go (default HOME/share-inbox).")
    var inbox: String?

    @Option(name: .customLong("listen"), help: "HOST:PORT to listen on (port 0: any free port).")
    var listen = "127.0.0.1:7443"

    @Option(name: .customLong("max-size"), help: "The largest file accepted, in bytes.")
    var maxSize: UInt64 = ShareServer.defaultMaxSize

    @Option(name: .customLong("max-transfers"), help: "Stop after this many connections (received or refused).")
    var maxTransfers: Int?

    @Flag(name: .customLong("stay-unlocked"), help: "Keep the vault unlocked while serving.")
    var stayUnlocked = false

    @Flag(name: .customLong("advertise"), help: "Announce the service by DNS-SD (_securefoundation._tcp on local.; needs avahi-daemon on Linux).")
    var advertise = false

    @Flag(name: .customLong("advertise-name"), help: "With --advertise: show this device's name in the announcement (hidden by default).")
    var advertiseName = false

    @OptionGroup var options: ShareOptions

    func run() async throws {
        do {
            let (host, port) = try ShareCLI.address(listen, option: "--listen")
            let (manager, group) = try options.open()
            let membership = try group.membership()
            let files = ProtectedFiles(manager: manager)
            if manager.isUnlocked { _ = try files.prepareClasses() }
            if !stayUnlocked { manager.lock() }
            let server = try await ShareServer.bind(host: host, port: port, membership: membership,
                                                    inbox: options.inbox(inbox), files: files,
                                                    isRevoked: { pin in (try? group.revokedPins().contains(pin)) ?? true },
                                                    isEnrolled: { pin in (try? group.isEnrolled(pin: pin)) ?? false },
                                                    maxSize: maxSize)
            print("listening on \(host):\(server.port) as \(membership.deviceName)")
            ShareCLI.flushStdout()
            var advertisement: ShareAdvertisement?
            if advertise || advertiseName {
                if host == "127.0.0.1" || host == "::1" || host == "localhost" {
                    CLI.warn("securefoundation: advertising a service that listens on \(host) only: other machines cannot reach it; use --listen 0.0.0.0:PORT")
                }
                advertisement = try await ShareDiscovery.advertise(port: server.port, membership: membership, showDeviceName: advertiseName)
                print("advertising \(advertisement?.name ?? "?") as \(ShareDiscovery.serviceType) in \(ShareDiscovery.domain) (\(advertisement?.txt.joined(separator: " ") ?? ""))")
                ShareCLI.flushStdout()
            }
            defer { advertisement?.stop() }
            let count = ShareCounter()
            let limit = maxTransfers
            let line = ProgressLine.enabled ? ReceiveProgressLine() : nil
            let onProgress: (@Sendable (ShareServer.Progress) -> Void)?
            if let line {
                onProgress = { line.report(name: $0.name, device: $0.device, received: $0.received, size: $0.size) }
            } else {
                onProgress = nil
            }
            try await server.run(onEvent: { event in
                line?.clear()
                switch event {
                case let .received(name, size, device):
                    print("received \(name) (\(size) bytes) from \(device)")
                    ShareCLI.flushStdout()
                case let .refused(peer, error):
                    CLI.warn("securefoundation: refused \(peer): \(error)")
                }
                if let limit, count.increment() >= limit {
                    Task { await server.close() }
                }
            }, onProgress: onProgress)
        } catch {
            throw ShareCLI.fail(error)
        }
    }
}

final class ShareCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func increment() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }
}

struct ShareSendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send files to a device of the group.",
        discussion: """
        The receiver must present a certificate of this group (and, with --device, of that \
        device) that is not revoked. Needs --passcode-file (this device's key is whenUnlocked). \
        Shows progress on a terminal; prints one line per file stored. With --to DEVICE (no \
        port), the receiver is found by DNS-SD (`share serve --advertise`; avahi-daemon on \
        Linux): each service of this group's tag is tried in turn until one proves by its \
        certificate to be DEVICE; discovery itself is not trusted.

        Examples:
          securefoundation share send photo.jpg --to 192.168.1.20:7443 \\
              --device desktop --passcode-file pass.txt
          securefoundation share send photo.jpg notes.pdf --to desktop \\
              --passcode-file pass.txt
          securefoundation share send --watch ~/Pictures/outbox --to desktop \\
              --passcode-file pass.txt
        """
    )

    @Argument(help: "The files to send.")
    var files: [String] = []

    @Option(name: .customLong("to"), help: "The receiver: HOST:PORT, or a device name to find by DNS-SD (`share serve --advertise`).")
    var to: String

    @Option(name: .customLong("watch"), help: ArgumentHelp(
        "Watch this folder: send each regular file once it is complete, and again when its content changes; runs until stopped.",
        valueName: "dir"))
    var watch: String?

    @Option(name: .customLong("settle"), help: "With --watch: seconds a closed file's size and time must stay unchanged before it is sent.")
    var settle: Double = 2

    @Flag(name: .customLong("once"), help: "With --watch: stop once every file present was sent (or failed), nothing being written.")
    var once = false

    @Option(name: .customLong("device"), help: "The receiving device's name, if it must be that one.")
    var device: String?

    @Option(name: .customLong("timeout"), help: "Seconds for connecting, the handshake, the reply, and a receiver that takes no bytes.")
    var timeout = 30

    @OptionGroup var options: ShareOptions

    func run() async throws {
        do {
            if watch != nil {
                guard files.isEmpty else { throw ValidationError("give files or --watch DIR, not both") }
                guard settle >= 0 && settle <= 3600 else { throw ValidationError("--settle must be 0...3600 seconds") }
            } else {
                guard !files.isEmpty else { throw ValidationError("give at least one file, or --watch DIR") }
                guard !once else { throw ValidationError("--once goes with --watch") }
            }
            guard (1...3600).contains(timeout) else { throw ValidationError("--timeout must be 1...3600") }
            let discovered = ShareCLI.isDeviceName(to)
            let address = discovered ? nil : try ShareCLI.address(to, option: "--to")
            if discovered, let device, device.lowercased() != to.lowercased() {
                throw ValidationError("--to names the device \(to), --device \(device): give one")
            }
            let (manager, group) = try options.open()
            let membership = try group.membership()
            let client = try ShareClient(membership: membership,
                                         isRevoked: { pin in (try? group.revokedPins().contains(pin)) ?? true })
            var found: DiscoveredPeer?
            let timeout = timeout, device = device, to = to
            func sendOne(_ path: String) async throws -> ShareClient.Sent {
                let name = (path as NSString).lastPathComponent
                let size = (try? FileCalls.status(atPath: path)).map(\.size)
                // The command line's one progress line (`share send NAME… 42% …`), cleared at the end.
                return try await ProgressLine.run("share send \(name)", total: size) { report in
                    let progress: @Sendable (UInt64, UInt64) -> Void = { done, _ in report(Int64(clamping: done)) }
                    let sent: ShareClient.Sent
                    if let address {
                        sent = try await client.send(path, to: address.0, port: address.1, device: device, timeout: .seconds(timeout), progress: progress)
                    } else if let peer = found {
                        sent = try await client.send(path, to: peer, device: to, timeout: .seconds(timeout), progress: progress)
                    } else {
                        (sent, found) = try await ShareCLI.sendToDiscovered(path, device: to, client: client, membership: membership,
                                                                             timeout: timeout, progress: progress)
                    }
                    return sent
                }
            }
            if let watch {
                let stateFile = ShareFolderWatcher.defaultStateFile(home: options.home.directory, directory: watch, receiver: to)
                let watcher = try ShareFolderWatcher(directory: watch, receiver: to, stateFile: stateFile, manager: manager,
                                                     settle: .milliseconds(Int(settle * 1000)))
                let once = once
                var failures = 0
                CLI.warn("securefoundation: watching \(watcher.directory) (\(watcher.seesCloses ? "closed files" : "settle time only")); state \(stateFile)")
                try await watcher.run(send: sendOne, report: { event in
                    switch event {
                    case let .sent(path, sent):
                        print("sent \(path) to \(sent.device) as \(sent.storedName) (\(sent.size) bytes)")
                    case let .unchanged(path):
                        print("unchanged \(path)")
                    case let .failed(path, why):
                        failures += 1
                        print("failed \(path): \(why)")
                    }
                    ShareCLI.flushStdout()
                }, stop: { watcher in
                    once && watcher.isDone(countingFailures: true)
                })
                if failures > 0 { throw ExitCode(1) }
                return
            }
            for path in files {
                let sent = try await sendOne(path)
                print("sent \(path) to \(sent.device) as \(sent.storedName) (\(sent.size) bytes)")
                ShareCLI.flushStdout()
            }
        } catch {
            throw ShareCLI.fail(error)
        }
    }
}

// MARK: list, open, revoke

/// `share list --nearby`: what DNS-SD finds, each service checked by a handshake.
enum ShareNearby {
    static func list(client: ShareClient, membership: ShareMembership, seconds: Int) async throws -> [ShareListCommand.NearbyJSON.Service] {
        let tag = try ShareDiscovery.groupTag(of: membership.root)
        var services: [ShareListCommand.NearbyJSON.Service] = []
        for try await peer in ShareDiscovery.browse(for: .seconds(seconds)) {
            var service = ShareListCommand.NearbyJSON.Service(instance: peer.instance, address: peer.address, port: peer.port,
                                                              state: "unknown", device: nil, pin: nil, detail: nil)
            if peer.group != tag {
                service.detail = "another group's tag"
            } else {
                do {
                    let who = try await client.identify(peer, timeout: .seconds(10))
                    service.device = who.device
                    service.pin = who.pin
                    service.state = who.revoked ? "revoked" : "member"
                } catch {
                    service.detail = "\(error)"
                }
            }
            services.append(service)
        }
        return services.sorted { ($0.instance, $0.port) < ($1.instance, $1.port) }
    }
}

struct ShareListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the files received, and the group's devices.",
        discussion: """
        One line per received file: its name and its size on disk (encrypted). With \
        --passcode-file, files still of class completeUnlessOpen are first upgraded to complete.

        Examples:
          securefoundation share list
          securefoundation share list --devices
          securefoundation share list --nearby --passcode-file pass.txt
        """
    )

    @Option(name: .customLong("inbox"), help: "The inbox (default HOME/share-inbox).")
    var inbox: String?

    @Flag(name: .customLong("devices"), help: "List the devices enrolled here and the revoked ones instead.")
    var devices = false

    @Flag(name: .customLong("json"), help: "Print the list as JSON (CLI.md in the documentation, \"JSON output\").")
    var json = false

    @Flag(name: .customLong("nearby"), help: "List the sharing services found by DNS-SD instead, with their state (member, revoked, unknown).")
    var nearby = false

    @Option(name: .customLong("seconds"), help: "With --nearby: how long to browse (1...60).")
    var seconds = 3

    @OptionGroup var options: ShareOptions

    struct NearbyJSON: Encodable {
        struct Service: Encodable {
            var instance: String; var address: String; var port: Int; var state: String
            var device: String?; var pin: String?; var detail: String?
        }
        var version = JSONOutput.schemaVersion
        var services: [Service]
    }

    struct FilesJSON: Encodable {
        struct File: Encodable { var name: String; var size: Int }
        var version = JSONOutput.schemaVersion
        var inbox: String
        var files: [File]
    }

    struct DevicesJSON: Encodable {
        struct Device: Encodable { var name: String; var pin: String; var revoked: Bool }
        var version = JSONOutput.schemaVersion
        var devices: [Device]
    }

    func run() async throws {
        do {
            let (manager, group) = try options.open()
            if nearby {
                guard (1...60).contains(seconds) else { throw ValidationError("--seconds must be 1...60") }
                let membership = try group.membership()
                let client = try ShareClient(membership: membership,
                                             isRevoked: { pin in (try? group.revokedPins().contains(pin)) ?? true })
                let list = try await ShareNearby.list(client: client, membership: membership, seconds: seconds)
                if json { try JSONOutput.write(NearbyJSON(services: list)); return }
                for service in list {
                    print([service.instance, "\(service.address):\(service.port)", service.state, service.device ?? "-",
                           service.detail ?? ""].joined(separator: "\t"))
                }
                return
            }
            if devices {
                let revoked = try group.revokedPins()
                let list = try group.members().map {
                    DevicesJSON.Device(name: $0.device, pin: "\($0.pin)", revoked: revoked.contains($0.pin))
                }
                if json { try JSONOutput.write(DevicesJSON(devices: list)); return }
                for device in list { print("\(device.name)\t\(device.pin)\t\(device.revoked ? "revoked" : "member")") }
                return
            }
            let directory = options.inbox(inbox)
            if manager.isUnlocked {
                try ShareOpenCommand.upgrade(directory, manager: manager)
            }
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
                .filter { !$0.hasPrefix(".") }.sorted()
            var files: [FilesJSON.File] = []
            for name in names {
                guard let info = try? FileCalls.linkStatus(directory + "/" + name), info.isRegularFile else { continue }
                files.append(.init(name: name, size: Int(info.size)))
            }
            if json { try JSONOutput.write(FilesJSON(inbox: directory, files: files)); return }
            for file in files { print("\(file.name)\t\(file.size)") }
        } catch {
            throw ShareCLI.fail(error)
        }
    }
}

struct ShareOpenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open",
        abstract: "Read a received file (needs --passcode-file).",
        usage: "securefoundation share open [options] [--inbox DIR] [-o OUTPUT] NAME",
        discussion: """
        Writes the file's bytes to standard output or -o. Received files are upgraded to class \
        complete first.

        Example:
          securefoundation share open photo.jpg -o photo.jpg --passcode-file pass.txt
        """
    )

    @Argument(help: "The file's name in the inbox.")
    var name: String

    @Option(name: .customLong("inbox"), help: "The inbox (default HOME/share-inbox).")
    var inbox: String?

    @Option(name: [.customShort("o"), .customLong("output")], help: "Where to write the bytes (default stdout).")
    var output: String?

    @OptionGroup var options: ShareOptions

    func run() throws {
        do {
            try ShareWire.checkName(name)
            let (manager, _) = try options.open()
            let directory = options.inbox(inbox)
            let path = directory + "/" + name
            guard FileManager.default.fileExists(atPath: path) else { throw ShareError.notFound("\(name) is not in the inbox") }
            let files = ProtectedFiles(manager: manager)
            if manager.isUnlocked { try Self.upgrade(directory, manager: manager) }
            if let output {
                try files.read(at: path, toFile: output)
            } else {
                try files.read(at: path, to: 1)
            }
        } catch {
            throw ShareCLI.fail(error)
        }
    }

    /// Received files, written completeUnlessOpen, become complete at the first unlock.
    static func upgrade(_ directory: String, manager: CryptoManager) throws {
        guard FileManager.default.fileExists(atPath: directory) else { return }
        let report = try ProtectedFiles(manager: manager).upgradeItems(inDirectory: directory, from: .completeUnlessOpen, to: .complete)
        if !report.changed.isEmpty { CLI.warn("upgraded \(report.changed.count) received file(s) to class complete") }
    }
}
