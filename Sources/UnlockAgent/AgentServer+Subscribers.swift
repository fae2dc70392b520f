import Foundation
import Cipher
import AgentWire
import Vault
import Age
import ProtectedFiles
import CPlatform
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension AgentServer {
    // MARK: Lock-state subscribers (run-loop thread only)

    func publishState() {
        let current: LockState = manager.isUnlocked ? .unlocked : .locked
        let subscribers = locked { state -> [Int32]? in
            guard state.published != current else { return nil }
            state.published = current
            return state.subscribers
        }
        guard let subscribers else { return }
        for fd in subscribers {
            UnixSocket.setTimeouts(fd, seconds: 1)
            do {
                try AgentProtocol.writeFrame(fd, AgentProtocol.okResponse([AgentProtocol.stateCode(current)]))
            } catch {
                dropSubscriber(fd)
            }
        }
    }

    /// Sends each new subscriber the current state and adds it to the list.
    func admitSubscribers() {
        let pending = locked { state -> [Int32] in
            defer { state.pendingSubscribers = [] }
            return state.pendingSubscribers
        }
        for fd in pending {
            let current: LockState = manager.isUnlocked ? .unlocked : .locked
            UnixSocket.setTimeouts(fd, seconds: 1)
            do {
                try AgentProtocol.writeFrame(fd, AgentProtocol.okResponse([AgentProtocol.stateCode(current)]))
                locked { $0.subscribers.append(fd) }
            } catch {
                close(fd)
            }
        }
    }

    func dropSubscriber(_ fd: Int32) {
        let removed = locked { state -> Bool in
            guard let index = state.subscribers.firstIndex(of: fd) else { return false }
            state.subscribers.remove(at: index)
            return true
        }
        if removed { close(fd) }
    }
}
