import Foundation
import Vault
import ProtectedFiles
import AgentWire

/// Everything the unlock agent and its client can fail with, each saying what to do.
public enum AgentError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No agent answers at this socket.
    case notRunning(socket: String)
    /// An agent already serves this socket.
    case alreadyRunning(socket: String)
    /// The socket's directory is unsafe (another owner, reachable by others, a symlink).
    case insecureDirectory(path: String, reason: String, fix: String)
    /// Something that is not the agent's socket is in the way.
    case pathInUse(path: String, reason: String)
    /// The agent refused the connection (the peer check failed).
    case refused(String)
    /// A malformed, oversized or unexpected message.
    case protocolViolation(String)
    /// The agent reported an error that has no vault meaning.
    case remote(String)
    /// A system call failed.
    case io(String)
    /// The agent did not answer in time.
    case timedOut(String)
    /// The agent's vault refused with its own typed error (a wrong passcode or answers, too
    /// many attempts, a class key unavailable, an invalid argument...); its message is the
    /// vault's.
    case vault(VaultError)
    /// The agent's protected files refused with their own typed error (a class unavailable in
    /// the agent, a file its vault does not open, a tampered header...); its message is theirs.
    case protectedFile(ProtectedFileError)

    public var description: String {
        switch self {
        case let .notRunning(socket):
            return AgentWireError.notRunning(socket: socket).description
        case let .alreadyRunning(socket):
            return "an unlock agent is already running at \(socket); stop it first with `securefoundation agent stop`"
        case let .insecureDirectory(path, reason, fix):
            return "the agent's socket directory \(path): \(reason); \(fix)"
        // The plumbing's words are AgentWire's (the front program's plugin prints them too).
        case let .pathInUse(path, reason):
            return AgentWireError.pathInUse(path: path, reason: reason).description
        case let .refused(why):
            return AgentWireError.refused(why).description
        case let .protocolViolation(why):
            return AgentWireError.protocolViolation(why).description
        case let .remote(why):
            return "the unlock agent reported: \(why)"
        case let .io(why):
            return AgentWireError.io(why).description
        case let .timedOut(why):
            return AgentWireError.timedOut(why).description
        case let .vault(error):
            return "\(error)"
        case let .protectedFile(error):
            return "\(error)"
        }
    }

    /// `error` as an agent error with the message it prints today: itself when it is one; a
    /// vault's error becomes ``vault(_:)``, a protected file's ``protectedFile(_:)``. Anything
    /// else (which the agent's plumbing does not throw) becomes ``remote(_:)``.
    static func mapping(_ error: any Error) -> AgentError {
        switch error {
        case let error as AgentError: return error
        case let error as AgentWireError: return AgentError(error)
        case let error as VaultError: return .vault(error)
        case let error as ProtectedFileError: return .protectedFile(error)
        default: return .remote("\(error)")
        }
    }

    /// The case of the same name; an error answer as the typed error it carries.
    init(_ error: AgentWireError) {
        switch error {
        case let .notRunning(socket): self = .notRunning(socket: socket)
        case let .pathInUse(path, reason): self = .pathInUse(path: path, reason: reason)
        case let .refused(why): self = .refused(why)
        case let .protocolViolation(why): self = .protocolViolation(why)
        case let .io(why): self = .io(why)
        case let .timedOut(why): self = .timedOut(why)
        case let .answered(wire): self = wire.error
        }
    }

    static func system(_ operation: String, _ path: String, _ code: Int32 = errno) -> AgentError {
        .io("\(operation) \(path): \(String(cString: strerror(code)))")
    }
}
