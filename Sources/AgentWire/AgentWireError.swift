#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What talking to the unlock agent over its socket can fail with, below the vault's meaning:
/// the cases of UnlockAgent's `AgentError` that the socket, the frames and the plugin meet, with
/// the same messages (UnlockAgent turns each into the `AgentError` case of the same name). An
/// error the agent answered with arrives as ``answered(_:)``.
package enum AgentWireError: Error, Sendable, CustomStringConvertible {
    /// No agent answers at this socket.
    case notRunning(socket: String)
    /// Something that is not the agent's socket is in the way.
    case pathInUse(path: String, reason: String)
    /// The agent refused the connection (the peer check failed).
    case refused(String)
    /// A malformed, oversized or unexpected message.
    case protocolViolation(String)
    /// A system call failed.
    case io(String)
    /// The agent did not answer in time.
    case timedOut(String)
    /// The agent answered with an error.
    case answered(WireError)

    package var description: String {
        switch self {
        case let .notRunning(socket):
            return "no unlock agent is running at \(socket); start one with `securefoundation agent start`"
        case let .pathInUse(path, reason):
            return "\(path) \(reason); remove it or give another path (--socket for the agent, --dir for the plugin link)"
        case let .refused(why):
            return "the unlock agent refused the connection: \(why)"
        case let .protocolViolation(why):
            return "unlock agent protocol error: \(why)"
        case let .io(why):
            return "unlock agent I/O error: \(why)"
        case let .timedOut(why):
            return "the unlock agent did not answer in time: \(why)"
        case let .answered(wire):
            return wire.description
        }
    }

    static func system(_ operation: String, _ path: String, _ code: Int32 = errno) -> AgentWireError {
        .io("\(operation) \(path): \(String(cString: strerror(code)))")
    }
}
