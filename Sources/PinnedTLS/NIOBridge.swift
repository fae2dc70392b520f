import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import NIOTLS
import SwiftASN1
import X509

/// What the verification callback decided, kept for the connection's owner: the typed refusal
/// cannot travel through BoringSSL, which only reports a failed handshake.
enum VerificationOutcome: Sendable {
    case accepted(TrustEvaluation)
    case refused(TLSTrustError)
}

enum NIOBridge {
    /// swift-certificates' view of certificates BoringSSL handed over.
    static func certificates(_ nio: [NIOSSLCertificate]) -> Result<[Certificate], TLSTrustError.Reason> {
        converted(nio).map(\.certificates)
    }

    /// The certificates BoringSSL handed over, parsed, with the DER they were parsed from.
    static func converted(_ nio: [NIOSSLCertificate])
        -> Result<(certificates: [Certificate], der: [[UInt8]]), TLSTrustError.Reason>
    {
        var result: [Certificate] = []
        var ders: [[UInt8]] = []
        result.reserveCapacity(nio.count)
        ders.reserveCapacity(nio.count)
        for certificate in nio {
            do {
                let der = try certificate.toDERBytes()
                ders.append(der)
                if let parsed = parsedCache.withLockedValue({ $0[der] }) {
                    result.append(parsed)
                    continue
                }
                let parsed = try Certificate(derEncoded: der)
                parsedCache.withLockedValue { cache in
                    if cache.count >= 256 { cache.removeAll() }
                    cache[der] = parsed
                }
                result.append(parsed)
            } catch {
                return .failure(.malformedCertificate("\(error)"))
            }
        }
        return .success((result, ders))
    }

    /// Certificates parsed from the same DER bytes before (a server presents the same chain to
    /// every client): parsing is the same work each time, so it is done once. The key is the
    /// whole DER encoding, so a different certificate never hits another's entry.
    private static let parsedCache = NIOLockedValueBox<[[UInt8]: Certificate]>([:])

    static func nioCertificate(_ certificate: Certificate) throws -> NIOSSLCertificate {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return try NIOSSLCertificate(bytes: serializer.serializedBytes, format: .der)
    }

    /// Anchors converted for BoringSSL, kept so that each handshake does not convert them again.
    private static let anchorCache = NIOLockedValueBox<[Certificate: NIOSSLCertificate]>([:])

    static func cachedNIOCertificate(_ certificate: Certificate) throws -> NIOSSLCertificate {
        if let cached = anchorCache.withLockedValue({ $0[certificate] }) { return cached }
        let converted = try nioCertificate(certificate)
        anchorCache.withLockedValue { cache in
            if cache.count >= 256 { cache.removeAll() }
            cache[certificate] = converted
        }
        return converted
    }

    /// TLS 1.2 and 1.3 only.
    static func restrictVersions(_ configuration: inout TLSConfiguration) {
        configuration.minimumTLSVersion = .tlsv12
        configuration.maximumTLSVersion = .tlsv13
    }

    /// The identity as swift-nio-ssl takes it. The key travels to BoringSSL as DER; the
    /// temporary copy is overwritten before it is released.
    static func material(_ identity: TLSIdentity) throws(PinnedTLSError)
        -> (chain: [NIOSSLCertificateSource], key: NIOSSLPrivateKeySource)
    {
        do {
            let chain: [NIOSSLCertificateSource] = try identity.chain.map { .certificate(try nioCertificate($0)) }
            let software: Certificate.PrivateKey
            switch identity.key {
            case .hardware(let tokenKey):
                // The key stays in hardware: BoringSSL asks it for each signature.
                return (chain, .privateKey(NIOSSLPrivateKey(customPrivateKey: TokenTLSKey(key: tokenKey))))
            case .software(let key):
                software = key
            }
            var der = try software.serializeAsPEM().derBytes
            defer { scrubBytes(&der) }
            return (chain, .privateKey(try NIOSSLPrivateKey(bytes: der, format: .der)))
        } catch {
            throw .invalidIdentity("the identity cannot be handed to TLS: \(error)")
        }
    }

    /// Puts `identity` into `configuration`.
    static func install(_ identity: TLSIdentity, in configuration: inout TLSConfiguration) throws(PinnedTLSError) {
        let material = try material(identity)
        configuration.certificateChain = material.chain
        configuration.privateKey = material.key
    }

    /// A verification callback that converts the presented chain, runs the evaluation, records
    /// the outcome in `outcome`, and hands BoringSSL the validated chain.
    ///
    /// When `cache` is given and `cachedAcceptance` decides from it (a chain validated before,
    /// still current, pins matching), the promise is completed at once on the event loop;
    /// otherwise `evaluate` runs in a task (chain building and signature checks, keychain
    /// anchors, reports). When `evaluationMayBlock` is false (the anchors are certificates held in
    /// memory, no keychain, no system store to load, no report handler to call) that task runs on
    /// the connection's event loop, as BoringSSL's own verification does, instead of hopping to
    /// the verification threads and back; otherwise on ``ThreadPoolExecutor/verification``.
    static func callback(
        outcome: NIOLockedValueBox<VerificationOutcome?>,
        peer: @escaping @Sendable () -> String,
        cache: VerifiedChainCache?,
        evaluationMayBlock: Bool,
        cachedAcceptance: @escaping @Sendable (CacheLookup) -> TrustEvaluation?,
        evaluate: @escaping @Sendable ([Certificate], CacheLookup?) async throws(TLSTrustError) -> TrustEvaluation
    ) -> NIOSSLCustomVerificationCallbackWithMetadata {
        { presented, promise in
            let chain: [Certificate]
            let lookup: CacheLookup?
            switch converted(presented) {
            case .success(let converted):
                chain = converted.certificates
                lookup = cache.map {
                    CacheLookup(cache: $0, presentedDigest: VerifiedChainCache.digest(presentedDER: converted.der))
                }
            case .failure(let reason):
                outcome.withLockedValue { $0 = .refused(TLSTrustError(host: peer(), reason: reason, presented: [])) }
                promise.succeed(.failed)
                return
            }
            if let lookup, let evaluation = cachedAcceptance(lookup),
               let result = try? accept(evaluation, chain: chain, presented: presented, outcome: outcome)
            {
                promise.succeed(result)
                return
            }
            // Never on the cooperative pool (see ThreadPoolExecutor).
            let executor: any TaskExecutor = evaluationMayBlock
                ? ThreadPoolExecutor.verification : EventLoopTaskExecutor(promise.futureResult.eventLoop)
            Task(executorPreference: executor) {
                do {
                    let evaluation = try await evaluate(chain, lookup)
                    promise.succeed(try accept(evaluation, chain: chain, presented: presented, outcome: outcome))
                } catch let error as TLSTrustError {
                    outcome.withLockedValue { $0 = .refused(error) }
                    promise.succeed(.failed)
                } catch {
                    outcome.withLockedValue {
                        $0 = .refused(TLSTrustError(host: peer(), reason: .malformedCertificate("\(error)"), chain: chain))
                    }
                    promise.succeed(.failed)
                }
            }
        }
    }

    /// Records the acceptance and gives BoringSSL the validated chain. The validated chain is the
    /// presented certificates plus the anchor: BoringSSL's objects are reused, an anchor is
    /// converted once.
    private static func accept(
        _ evaluation: TrustEvaluation, chain: [Certificate], presented: [NIOSSLCertificate],
        outcome: NIOLockedValueBox<VerificationOutcome?>
    ) throws -> NIOSSLVerificationResultWithMetadata {
        let nioChain = try evaluation.validatedChain.map { certificate in
            if let index = chain.firstIndex(of: certificate) { return presented[index] }
            return try cachedNIOCertificate(certificate)
        }
        guard !nioChain.isEmpty else { throw PinnedTLSError.invalidIdentity("an empty validated chain") }
        outcome.withLockedValue { $0 = .accepted(evaluation) }
        return .certificateVerified(VerificationMetadata(NIOSSL.ValidatedCertificateChain(nioChain)))
    }
}

/// Runs a task's jobs on one event loop, each in a later tick of that loop (never inside the
/// caller's own call).
final class EventLoopTaskExecutor: TaskExecutor {
    private let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        // The closure holds the executor until the job has run.
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

/// Reports, once, the end of the TLS handshake: success when it completes, the error when the
/// channel errs or closes first. `done` runs on the event loop.
final class HandshakeWaiter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let done: (Result<Void, any Error>) -> Void
    private var finished = false

    init(promise: EventLoopPromise<Void>) {
        done = { promise.completeWith($0) }
    }

    init(_ done: @escaping (Result<Void, any Error>) -> Void) {
        self.done = done
    }

    private func finish(_ result: Result<Void, any Error>) {
        guard !finished else { return }
        finished = true
        done(result)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            finish(.success(()))
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(.failure(error))
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failure(ChannelError.eof))
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        finish(.failure(ChannelError.ioOnClosedChannel))
    }
}

/// The end of a handshake and what it yields, awaited from a task. Unlike awaiting an
/// `EventLoopFuture`, waiting does not post work to the event loop, and a handshake that has
/// already finished is answered without suspending.
final class HandshakeSignal<Value: Sendable>: Sendable {
    private enum State {
        case pending(CheckedContinuation<Value, any Error>?)
        case finished(Result<Value, any Error>)
    }

    private let state = NIOLockedValueBox(State.pending(nil))

    /// Records the outcome and resumes the waiter, if any. Only the first call counts.
    func finish(_ result: Result<Value, any Error>) {
        let waiter: CheckedContinuation<Value, any Error>? = state.withLockedValue { state in
            guard case .pending(let waiter) = state else { return nil }
            state = .finished(result)
            return waiter
        }
        waiter?.resume(with: result)
    }

    /// The value, if the handshake has succeeded already; does not wait.
    func peek() -> Value? {
        state.withLockedValue { state in
            guard case .finished(.success(let value)) = state else { return nil }
            return value
        }
    }

    /// Waits for the outcome (one waiter at a time).
    func wait() async throws -> Value {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
            let result: Result<Value, any Error>? = state.withLockedValue { state in
                switch state {
                case .finished(let result):
                    return result
                case .pending:
                    state = .pending(continuation)
                    return nil
                }
            }
            if let result { continuation.resume(with: result) }
        }
    }
}

extension TimeAmount {
    var seconds: Double { Double(nanoseconds) / 1_000_000_000 }
}

/// A channel wrapped for async use on the event loop that no task has taken yet.
///
/// NIO stops the process when an async channel's writer is released unfinished. A connection
/// whose handshake completes but which is never served (the server closed before taking it, the
/// serving task was cancelled, the caller that connected went away) is released here instead:
/// its writer is finished and its channel closed.
final class PendingAsyncChannel<Inbound: Sendable, Outbound: Sendable>: Sendable {
    private let channel: NIOLockedValueBox<NIOAsyncChannel<Inbound, Outbound>?>

    init(_ channel: NIOAsyncChannel<Inbound, Outbound>) {
        self.channel = NIOLockedValueBox(channel)
    }

    /// The channel, once; its taker must finish it (`executeThenClose`).
    func take() -> NIOAsyncChannel<Inbound, Outbound>? {
        channel.withLockedValue { channel in
            defer { channel = nil }
            return channel
        }
    }

    /// Finishes and closes the channel if nobody took it (in a task on its event loop, which
    /// holds the channel until it is finished).
    func discard() {
        guard let channel = take() else { return }
        channel.channel.close(promise: nil)
        Task(executorPreference: EventLoopTaskExecutor(channel.channel.eventLoop)) {
            try? await channel.executeThenClose { _, _ in }
        }
    }

    deinit {
        discard()
    }
}
