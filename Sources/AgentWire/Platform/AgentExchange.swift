#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Cipher
import CPlatform

/// One request to the unlock agent and its answer: the connection (to an agent of this user
/// only: the socket's peer is checked with `SO_PEERCRED`), the frames, the retry of a request
/// the agent turned away unread, and the error answer decoded. UnlockAgent's `AgentClient` and
/// the age plugin both send through it.
package enum AgentExchange {
    /// How many times a request the agent turned away unread is sent in all.
    package static let attemptsWhenBusy = 4

    /// Connects to the agent at `socketPath`, checking that its process runs as this user.
    /// - Parameters:
    ///   - socketPath: The agent's socket.
    ///   - timeout: Seconds for the connection.
    /// - Returns: The connected socket.
    /// - Throws: ``AgentWireError``: `notRunning` when nothing listens there, `refused` for
    ///   another user's agent.
    package static func connect(socketPath: String, timeout: Double) throws(AgentWireError) -> Int32 {
        let fd: Int32
        do { fd = try UnixSocket.connect(to: socketPath, timeout: timeout) } catch let error as AgentWireError { throw error } catch { throw .io("\(error)") }
        var uid: UInt32 = 0
        var pid: Int32 = 0
        let code = sf_peer_credentials(fd, &uid, &pid)
        guard code == 0, uid == UInt32(geteuid()) else {
            close(fd)
            throw AgentWireError.refused(code == 0 ? "the socket \(socketPath) is served by uid \(uid), not by this user" : "the agent's uid cannot be checked")
        }
        return fd
    }

    /// Sends one request and returns the answer's payload (a status-0 frame without its status
    /// byte), all within `timeout` seconds.
    ///
    /// The agent gives a connection that has not sent its request yet up to a newcomer when its
    /// slots are full, or when one client holds too many such connections (its defence against
    /// clients that connect and stay silent): that connection is answered "busy" and closed
    /// before its request is read. A client with many threads can meet this on a loaded machine
    /// (each thread's connection is silent between `connect` and `send`). Such a request was
    /// never handled, so it is sent again on a new connection, a few times, after a short pause.
    /// - Parameters:
    ///   - body: The request (version, operation, payload).
    ///   - socketPath: The agent's socket.
    ///   - timeout: Seconds for each attempt.
    /// - Returns: The answer's payload.
    /// - Throws: ``AgentWireError``; ``AgentWireError/answered(_:)`` for an error answer.
    package static func request(_ body: SecretBytes, socketPath: String, timeout: Double) throws(AgentWireError) -> SecretBytes {
        var attempt = 1
        while true {
            do {
                return try exchange(body, socketPath: socketPath, timeout: timeout)
            } catch let turnedAway as TurnedAway {
                guard attempt < attemptsWhenBusy else { throw turnedAway.error }
            } catch AgentWireError.answered(let wire) where wire.kind == "other" && wire.message == AgentFrames.busyMessage {
                guard attempt < attemptsWhenBusy else { throw AgentWireError.answered(wire) }
            } catch {
                throw error as? AgentWireError ?? .io("\(error)")
            }
            usleep(UInt32(5_000 * attempt))
            attempt += 1
        }
    }

    /// The agent closed the connection before the whole request was sent: it read none of it
    /// (a request is handled only once all of it arrived).
    private struct TurnedAway: Error {
        let error: AgentWireError
    }

    private static func exchange(_ body: SecretBytes, socketPath: String, timeout: Double) throws -> SecretBytes {
        let deadline = UnixSocket.monotonicNow() + timeout
        let fd = try connect(socketPath: socketPath, timeout: timeout)
        defer { close(fd) }
        do {
            try AgentFrames.writeFrame(fd, body)
        } catch let error as AgentWireError {
            guard case .io = error else { throw error }
            throw TurnedAway(error: error)
        }
        let frame: SecretBytes
        do {
            frame = try AgentFrames.readFrame(fd, deadline: deadline)
        } catch AgentWireError.timedOut {
            throw AgentWireError.timedOut("no answer from the agent at \(socketPath) within \(seconds(timeout)) s: it is stopped or hung (check it with `securefoundation agent status`; restart it, or set SECUREFOUNDATION_AGENT=off to use --passcode-file alone)")
        }
        defer { frame.wipe() }
        let status: UInt8 = frame.withUnsafeBytes { $0.first ?? 255 }
        switch status {
        case 0:
            return frame.slice(1..<frame.count)
        case 1:
            let text = frame.withUnsafeBytes { bytes in Data([UInt8](bytes[1...])) }
            guard let wire = try? JSONDecoder().decode(WireError.self, from: text) else {
                throw AgentWireError.protocolViolation("an unreadable error answer: \(String(decoding: text.prefix(200), as: UTF8.self))")
            }
            throw AgentWireError.answered(wire)
        default:
            throw AgentWireError.protocolViolation("an answer with status \(status)")
        }
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}
