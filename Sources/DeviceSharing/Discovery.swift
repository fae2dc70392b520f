internal import CDNSSD
import Cipher
import Crypto
import Foundation
import X509

/// A sharing service found on the local network by DNS-SD.
///
/// Nothing in it is trusted: anyone on the link can advertise any name, port, address or TXT
/// record. It only says where to try; mutual TLS with the group's root decides who the peer is
/// (``ShareClient/send(_:to:as:device:timeout:progress:)``, ``ShareClient/identify(_:timeout:)``).
public struct DiscoveredPeer: Sendable, Hashable, CustomStringConvertible {
    /// The service instance name (`securefoundation-…`, or the device name when its owner chose
    /// to advertise it).
    public var instance: String
    /// The host name the service points to (`NAME.local.`).
    public var host: String
    /// The TCP port.
    public var port: Int
    /// The addresses the host name resolved to (IPv4), in the order found.
    public var addresses: [String]
    /// The TXT record's protocol version (`v`), if it had one.
    public var version: Int?
    /// The TXT record's group tag (`g`), if it had one: see `ShareDiscovery.groupTag(of:)`.
    public var group: String?
    /// The TXT record's device name (`n`), present only when the advertiser asked for it. Claimed,
    /// not proven: the certificate names the device.
    public var advertisedDevice: String?
    /// The interface it was found on.
    public var interfaceIndex: UInt32

    /// A peer from its parts.
    /// - Parameters:
    ///   - instance: the service instance name.
    ///   - host: the host name it resolved to.
    ///   - port: its port.
    ///   - addresses: its addresses.
    ///   - version: the TXT record's protocol version (`v`), if any.
    ///   - group: the TXT record's group tag (`g`), if any.
    ///   - advertisedDevice: the TXT record's device name (`n`), if any.
    ///   - interfaceIndex: the interface it was found on.
    public init(instance: String, host: String, port: Int, addresses: [String], version: Int?, group: String?,
                advertisedDevice: String?, interfaceIndex: UInt32) {
        self.instance = instance
        self.host = host
        self.port = port
        self.addresses = addresses
        self.version = version
        self.group = group
        self.advertisedDevice = advertisedDevice
        self.interfaceIndex = interfaceIndex
    }

    /// The address to connect to: the first one resolved, else the host name.
    public var address: String { addresses.first ?? host }

    public var description: String { "\(instance) (\(address):\(port))" }
}

/// DNS-SD discovery of the group's devices: the platform's `dns_sd` API (Bonjour on Apple
/// platforms, Avahi's compatibility library and `avahi-daemon` on Linux), on the `local.` domain.
///
/// The TXT record carries only `v=1` (the protocol version) and `g=` (a 16-hex-digit tag of the
/// group's root key), plus `n=DEVICE` only when the user asks for the device name to be shown.
/// What that leaks to anyone on the link: that a SecureFoundation sharing service runs on that
/// host and port, and which services belong to the same group (same tag); not the group's name,
/// not the device's name (the instance name is random per start unless the name is asked for).
public enum ShareDiscovery {
    /// The DNS-SD service type.
    package static let serviceType = "_securefoundation._tcp"
    /// The domain browsed and registered in.
    public static let domain = "local."
    /// The protocol version advertised (`v=`): the sharing wire format of FORMATS.md.
    package static let protocolVersion = 1
    /// The most peers one browse reports (and resolves).
    package static let maxPeers = 64

    /// The group tag advertised in `g=`: the first 8 bytes of SHA-256 over the root's `sha256/`
    /// key pin (its text), in lowercase hex. It tells services of one group apart from others'
    /// without naming the group; it proves nothing (anyone can copy it).
    package static func groupTag(of root: Certificate) throws(ShareError) -> String {
        let pin = try ShareGroup.pin(root)
        return Encoding.hex(SHA256.hash(data: Array(pin.utf8)).prefix(8))
    }

    /// The TXT record's strings for a membership.
    package static func txtRecord(for membership: ShareMembership, showDeviceName: Bool) throws(ShareError) -> [String] {
        var entries = ["v=\(protocolVersion)", "g=\(try groupTag(of: membership.root))"]
        if showDeviceName { entries.append("n=\(membership.deviceName)") }
        return entries
    }

    /// Browses for `duration` and reports each service found once (by instance name), resolved
    /// to a host, a port and an address, in the order they resolve. The sequence ends after
    /// `duration` or `maxPeers` peers, or when the consumer stops iterating; it throws
    /// ``ShareError/connectionFailed(_:)`` when DNS-SD is not available (no `avahi-daemon`).
    /// - Parameter duration: how long to browse.
    /// - Returns: the peers, as an asynchronous sequence.
    public static func browse(for duration: Duration) -> AsyncThrowingStream<DiscoveredPeer, any Error> {
        AsyncThrowingStream { continuation in
            let browser = DNSSDBrowser(deadline: .now + duration, continuation: continuation)
            continuation.onTermination = { _ in browser.loop.stop() }
            browser.start()
        }
    }

    /// Registers the sharing service on `port` until the advertisement is stopped (or
    /// released). Waits at most `timeout` for the DNS-SD daemon to confirm the registration.
    /// - Parameters:
    ///   - port: the port the sharing server listens on.
    ///   - membership: this device's membership (its name, when it is shown).
    ///   - showDeviceName: the instance name and `n=` are the device's name (else the instance
    ///     name is `securefoundation-` and 8 random hex digits).
    ///   - timeout: how long to wait for the daemon to confirm the registration.
    /// - Returns: the advertisement; stop it (or release it) to withdraw the service.
    /// - Throws: ``ShareError/connectionFailed(_:)`` for a port outside 1-65535, a DNS-SD daemon that
    ///   is not available, ends the registration or does not confirm it within `timeout`;
    ///   ``ShareError/peerRefused(_:)`` when the root's key cannot be encoded for the group tag.
    public static func advertise(port: Int, membership: ShareMembership, showDeviceName: Bool,
                                 timeout: Duration = .seconds(10)) async throws(ShareError) -> ShareAdvertisement {
        guard (1...65535).contains(port) else { throw .connectionFailed("cannot advertise port \(port)") }
        let txt = try txtRecord(for: membership, showDeviceName: showDeviceName)
        let name = showDeviceName ? membership.deviceName
            : "securefoundation-" + Encoding.hex((0..<4).map { _ in UInt8.random(in: 0...255) })
        let registration = DNSSDRegistration(name: name, port: port, txt: txt, timeout: timeout)
        do {
            let registered = try await registration.start()
            return ShareAdvertisement(name: registered, txt: txt, registration: registration)
        } catch let error as ShareError {
            throw error
        } catch {
            throw .connectionFailed("\(error)")
        }
    }

    /// Sets Avahi's compatibility layer quiet (it warns on stderr once per process otherwise).
    static let quiet: Void = { setenv("AVAHI_COMPAT_NOWARN", "1", 0) }()

    static func unavailable(_ call: String, _ code: Int32) -> ShareError {
        if code == SF_DNSSD_NOT_INSTALLED {
            return .connectionFailed("DNS-SD is not available: the library libdns_sd.so.1 could not be loaded; install it (Debian: apt-get install libavahi-compat-libdnssd1) and start avahi-daemon, or give the receiver as HOST:PORT")
        }
        // kDNSServiceErr_ServiceNotRunning (-65563), kDNSServiceErr_Unknown (-65537): Avahi's
        // compatibility library reports a daemon it cannot reach with either.
        return .connectionFailed("DNS-SD is not available (\(call) failed with \(code)): start avahi-daemon (Linux) or mDNSResponder, or give the receiver as HOST:PORT")
    }

    /// The TXT record's strings (each a length byte and the bytes), as key/value pairs.
    static func parseTXT(_ bytes: UnsafeBufferPointer<UInt8>) -> [String: String] {
        var result: [String: String] = [:]
        var index = 0
        while index < bytes.count {
            let length = Int(bytes[index])
            index += 1
            guard index + length <= bytes.count else { break }
            let entry = String(decoding: bytes[index..<(index + length)], as: UTF8.self)
            index += length
            guard let equals = entry.firstIndex(of: "=") else { continue }
            let key = entry[..<equals].lowercased()
            if result[key] == nil { result[key] = String(entry[entry.index(after: equals)...]) }
        }
        return result
    }

    static func encodeTXT(_ entries: [String]) -> [UInt8] {
        var bytes: [UInt8] = []
        for entry in entries {
            let utf8 = Array(entry.utf8.prefix(255))
            bytes.append(UInt8(utf8.count))
            bytes += utf8
        }
        return bytes
    }
}

/// A registered sharing service; ``stop()`` (or releasing it) withdraws it.
public final class ShareAdvertisement: Sendable {
    /// The instance name registered (the daemon may have renamed it on a conflict).
    public let name: String
    /// The TXT record's strings.
    public let txt: [String]
    private let registration: DNSSDRegistration

    init(name: String, txt: [String], registration: DNSSDRegistration) {
        self.name = name
        self.txt = txt
        self.registration = registration
    }

    /// Withdraws the service.
    public func stop() { registration.loop.stop() }

    deinit { registration.loop.stop() }
}

// MARK: the event loop of dns_sd operations

/// Runs `dns_sd` operations on a thread of its own: polls their sockets (100 ms at a time, so
/// a stop or the deadline is seen within that) and calls `DNSServiceProcessResult`; their
/// callbacks run on that thread. Operations finished by a callback are deallocated after it.
final class DNSSDLoop: @unchecked Sendable {
    private let lock = NSLock()
    private var stopped = false
    private let deadline: ContinuousClock.Instant?
    /// Touched only by the loop thread (and before it starts).
    private var refs: [OpaquePointer] = []
    private var finished: [OpaquePointer] = []
    private var onEnd: (@Sendable () -> Void)?

    init(deadline: ContinuousClock.Instant?) {
        _ = ShareDiscovery.quiet
        self.deadline = deadline
    }

    func add(_ ref: OpaquePointer) { refs.append(ref) }

    func finish(_ ref: OpaquePointer) {
        if !finished.contains(ref) { finished.append(ref) }
    }

    func start(onEnd: @escaping @Sendable () -> Void) {
        self.onEnd = onEnd
        let thread = Thread { self.run() }
        thread.name = "dns-sd"
        thread.start()
    }

    func stop() { lock.withLock { stopped = true } }

    var isStopped: Bool { lock.withLock { stopped } }

    private func run() {
        while !isStopped, !refs.isEmpty {
            if let deadline, ContinuousClock.now >= deadline { break }
            let current = refs
            var fds = current.map { pollfd(fd: sf_DNSServiceRefSockFD($0), events: Int16(POLLIN), revents: 0) }
            let ready = poll(&fds, nfds_t(fds.count), 100)
            if ready > 0 {
                for (index, fd) in fds.enumerated() where fd.revents != 0 && !finished.contains(current[index]) {
                    if sf_DNSServiceProcessResult(current[index]) != 0 { finish(current[index]) }
                }
            }
            for ref in finished {
                if let index = refs.firstIndex(of: ref) {
                    refs.remove(at: index)
                    sf_DNSServiceRefDeallocate(ref)
                }
            }
            finished.removeAll()
        }
        for ref in refs { sf_DNSServiceRefDeallocate(ref) }
        refs.removeAll()
        onEnd?()
        onEnd = nil
    }
}

/// Browse → resolve → address lookup, reporting into a stream.
final class DNSSDBrowser: @unchecked Sendable {
    /// One service being resolved (then its address looked up).
    final class Pending {
        let instance: String
        let interfaceIndex: UInt32
        var host = ""
        var port = 0
        var txt: [String: String] = [:]
        unowned let browser: DNSSDBrowser
        init(instance: String, interfaceIndex: UInt32, browser: DNSSDBrowser) {
            self.instance = instance
            self.interfaceIndex = interfaceIndex
            self.browser = browser
        }
    }

    let loop: DNSSDLoop
    private let continuation: AsyncThrowingStream<DiscoveredPeer, any Error>.Continuation
    /// Touched only on the loop thread.
    private var seen: Set<String> = []
    private var reported: Set<String> = []
    private var pending: [Pending] = []

    init(deadline: ContinuousClock.Instant, continuation: AsyncThrowingStream<DiscoveredPeer, any Error>.Continuation) {
        loop = DNSSDLoop(deadline: deadline)
        self.continuation = continuation
    }

    func start() {
        var ref: OpaquePointer?
        let context = Unmanaged.passUnretained(self).toOpaque()
        let status = sf_DNSServiceBrowse(&ref, 0, 0, ShareDiscovery.serviceType, ShareDiscovery.domain, { _, flags, interface, error, name, _, _, context in
            guard let context, error == 0, flags & 0x2 != 0, let name else { return }
            Unmanaged<DNSSDBrowser>.fromOpaque(context).takeUnretainedValue().found(String(cString: name), interface: interface)
        }, context)
        guard status == 0, let ref else {
            continuation.finish(throwing: ShareDiscovery.unavailable("DNSServiceBrowse", status))
            return
        }
        loop.add(ref)
        // The browser stays alive until the loop ends.
        loop.start { [self] in
            pending.removeAll()
            continuation.finish()
        }
    }

    private func found(_ instance: String, interface: UInt32) {
        guard !seen.contains(instance), seen.count < ShareDiscovery.maxPeers else { return }
        seen.insert(instance)
        let item = Pending(instance: instance, interfaceIndex: interface, browser: self)
        pending.append(item)
        var ref: OpaquePointer?
        let status = sf_DNSServiceResolve(&ref, 0, interface, instance, ShareDiscovery.serviceType, ShareDiscovery.domain, {
            ref, _, _, error, _, host, port, txtLength, txt, context in
            guard let context else { return }
            let item = Unmanaged<Pending>.fromOpaque(context).takeUnretainedValue()
            if let ref { item.browser.loop.finish(ref) }
            guard error == 0, let host else { return }
            item.host = String(cString: host)
            item.port = Int(UInt16(bigEndian: port))
            if let txt { item.txt = ShareDiscovery.parseTXT(UnsafeBufferPointer(start: txt, count: Int(txtLength))) }
            item.browser.lookUp(item)
        }, Unmanaged.passUnretained(item).toOpaque())
        if status == 0, let ref { loop.add(ref) } else { seen.remove(instance) }
    }

    fileprivate func lookUp(_ item: Pending) {
        var ref: OpaquePointer?
        // A record (type 1), class IN (1).
        let status = sf_DNSServiceQueryRecord(&ref, 0, item.interfaceIndex, item.host, 1, 1, {
            ref, flags, _, error, _, _, _, length, data, _, context in
            guard let context else { return }
            let item = Unmanaged<Pending>.fromOpaque(context).takeUnretainedValue()
            guard error == 0, flags & 0x2 != 0, length == 4, let data else { return }
            let bytes = data.assumingMemoryBound(to: UInt8.self)
            let address = "\(bytes[0]).\(bytes[1]).\(bytes[2]).\(bytes[3])"
            if let ref { item.browser.loop.finish(ref) }
            item.browser.report(item, address: address)
        }, Unmanaged.passUnretained(item).toOpaque())
        if status == 0, let ref { loop.add(ref) }
    }

    fileprivate func report(_ item: Pending, address: String) {
        guard !reported.contains(item.instance) else { return }
        reported.insert(item.instance)
        let peer = DiscoveredPeer(instance: item.instance, host: item.host, port: item.port, addresses: [address],
                                  version: item.txt["v"].flatMap { Int($0) }, group: item.txt["g"],
                                  advertisedDevice: item.txt["n"], interfaceIndex: item.interfaceIndex)
        continuation.yield(peer)
        if reported.count >= ShareDiscovery.maxPeers { loop.stop() }
    }
}

/// One service registration, kept until its loop stops.
final class DNSSDRegistration: @unchecked Sendable {
    let loop = DNSSDLoop(deadline: nil)
    private let name: String
    private let port: Int
    private let txt: [String]
    private let timeout: Duration
    private let lock = NSLock()
    private var waiter: CheckedContinuation<String, any Error>?

    init(name: String, port: Int, txt: [String], timeout: Duration) {
        self.name = name
        self.port = port
        self.txt = txt
        self.timeout = timeout
    }

    func start() async throws -> String {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, any Error>) in
            lock.withLock { waiter = continuation }
            var ref: OpaquePointer?
            let record = ShareDiscovery.encodeTXT(txt)
            let status = record.withUnsafeBytes { bytes in
                sf_DNSServiceRegister(&ref, 0, 0, name, ShareDiscovery.serviceType, ShareDiscovery.domain, nil,
                                   UInt16(port).bigEndian, UInt16(bytes.count), bytes.baseAddress, { _, _, error, name, _, _, context in
                    guard let context else { return }
                    let registration = Unmanaged<DNSSDRegistration>.fromOpaque(context).takeUnretainedValue()
                    if error == 0 {
                        registration.resume(.success(name.map { String(cString: $0) } ?? registration.name))
                    } else {
                        registration.resume(.failure(ShareDiscovery.unavailable("DNSServiceRegister", error)))
                    }
                }, Unmanaged.passUnretained(self).toOpaque())
            }
            guard status == 0, let ref else {
                resume(.failure(ShareDiscovery.unavailable("DNSServiceRegister", status)))
                return
            }
            loop.add(ref)
            // The registration object lives as long as its loop (the advertisement holds both).
            loop.start { [self] in
                resume(.failure(ShareError.connectionFailed("the DNS-SD registration ended")))
            }
            let timeout = self.timeout
            Task { [self] in
                try? await Task.sleep(for: timeout)
                if resume(.failure(ShareError.connectionFailed("the DNS-SD daemon did not confirm the registration within \(timeout)"))) {
                    loop.stop()
                }
            }
        }
    }

    /// Resumes the waiter once; whether this call did.
    @discardableResult
    private func resume(_ result: Result<String, any Error>) -> Bool {
        let waiter = lock.withLock { () -> CheckedContinuation<String, any Error>? in
            defer { self.waiter = nil }
            return self.waiter
        }
        guard let waiter else { return false }
        waiter.resume(with: result)
        return true
    }
}
