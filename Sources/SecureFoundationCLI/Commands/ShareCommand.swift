import AgeCommandLine
import ArgumentParser
import DeviceSharing
import Foundation
import HardwareKeys
import PinnedTLS
import SecureFoundation

/// `securefoundation share …`: files between the machines of one group, over mutual TLS.
struct ShareCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "share",
        abstract: "Share files between your own machines over mutual TLS; received files are protected files.",
        discussion: """
        A group has its own root certificate: every member's certificate is issued by it, and \
        both sides trust that root only (never the system roots). Received files are stored in \
        the inbox (default HOME/share-inbox) as protected files of class completeUnlessOpen: \
        receiving works while the vault is locked, reading needs an unlock. See SHARING.md in the documentation.

        Set up: laptop (192.168.1.10) makes the group, desktop (192.168.1.20) joins:
          # on laptop
          securefoundation share init --new-group --name laptop \\
              --passcode-file pass.txt
          securefoundation share invite -o invite.json --passcode-file pass.txt
          # on desktop, with invite.json
          securefoundation share join invite.json --name desktop -o request.json \\
              --passcode-file pass.txt
          # on laptop, with request.json
          securefoundation share approve request.json -o desktop.pem \\
              --passcode-file pass.txt
          # on desktop, with desktop.pem
          securefoundation share join --certificate desktop.pem \\
              --passcode-file pass.txt
        or over the network, in one step:
          # on laptop
          securefoundation share invite -o invite.json --listen 0.0.0.0:7444 \\
              --passcode-file pass.txt
          # on desktop, with invite.json
          securefoundation share join invite.json --name desktop \\
              --connect 192.168.1.10:7444 --passcode-file pass.txt

        Use:
          # on desktop
          securefoundation share serve --listen 0.0.0.0:7443 --passcode-file pass.txt
          # on laptop
          securefoundation share send photo.jpg --to 192.168.1.20:7443 \\
              --device desktop --passcode-file pass.txt
          # on desktop
          securefoundation share list
          securefoundation share open photo.jpg -o photo.jpg --passcode-file pass.txt


        """ + ShareCLI.exitStatus,
        subcommands: [ShareInitCommand.self, ShareInviteCommand.self, ShareJoinCommand.self, ShareApproveCommand.self,
                      ShareServeCommand.self, ShareSendCommand.self, ShareListCommand.self, ShareOpenCommand.self,
                      ShareRevokeCommand.self]
    )
}

enum ShareCLI {
    static let exitStatus = """
    Exit status: 0 success, 36 vault locked (give --passcode-file), 44 not found or not a member, \
    64 usage, 50 the peer was refused (not of this group, revoked, another device), 51 the \
    receiver did not store the file (digest mismatch, refused name or size), 52 invalid or \
    expired enrolment, 7 no connection, 74 a file cannot be read or written, 2 the revocation \
    list cannot be trusted (the data directory was changed), 1 any other error (CLI.md in the documentation).
    """

    /// Reports `error` on stderr and returns the exit code of the one table (docs/CLI.md).
    static func fail(_ error: any Error) -> ExitCode { CLI.fail(error) }

    /// "HOST:PORT" or "[IPv6]:PORT".
    static func address(_ text: String, option: String) throws -> (String, Int) {
        guard let address = TLSCLI.hostAndPort(text, lowestPort: 0) else {
            throw ValidationError("\(option) must be HOST:PORT (or [IPv6]:PORT) with a port of 0...65535")
        }
        return address
    }

    static func flushStdout() { fflush(nil) }

    /// Whether `--to` names a device (a DNS label) rather than HOST:PORT.
    static func isDeviceName(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 63 && !text.contains(":")
            && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
            && !text.allSatisfy { $0.isNumber }
    }

    /// Browses for at most `timeout` seconds and tries each service of this group's tag, in the
    /// order found, until one proves (by its certificate) to be `device` and stores the file.
    /// Services of another tag are skipped; a refusal (another group, another device, revoked,
    /// no connection) moves on to the next one and is said on stderr.
    static func sendToDiscovered(_ path: String, device: String, client: ShareClient, membership: ShareMembership,
                                 timeout: Int, progress: @escaping @Sendable (UInt64, UInt64) -> Void) async throws
        -> (ShareClient.Sent, DiscoveredPeer) {
        let tag = try ShareDiscovery.groupTag(of: membership.root)
        var last: ShareError?
        var tried = 0
        for try await peer in ShareDiscovery.browse(for: .seconds(timeout)) {
            guard peer.group == tag, peer.version == ShareDiscovery.protocolVersion else { continue }
            if let advertised = peer.advertisedDevice, advertised.lowercased() != device.lowercased() { continue }
            tried += 1
            do {
                let sent = try await client.send(path, to: peer, device: device, timeout: .seconds(timeout), progress: progress)
                return (sent, peer)
            } catch {
                CLI.warn("securefoundation: \(peer): \(error); trying the next service")
                last = error
            }
        }
        if let last { throw last }
        throw ShareError.notFound("no service of this group found by DNS-SD within \(timeout) s for the device \(device)"
                                  + (tried == 0 ? "" : " (\(tried) tried)")
                                  + ": is `share serve --advertise` running there, and avahi-daemon here? or give --to HOST:PORT")
    }
}

/// The data directory, the passcode and the inbox.
struct ShareOptions: ParsableArguments {
    @OptionGroup var home: HomeOptions

    @Option(name: .customLong("passcode-file"), help: "Unlock the vault with the passcode in this file (`-` for stdin).")
    var passcodeFile: String?

    /// The module and PIN of a key that stays in a PKCS #11 token, or the TCTI of one in the TPM
    /// (`share init/join --key`, `share init --root-key`).
    @OptionGroup var hardware: HardwareKeyOptions

    /// The crypto manager (unlocked when a passcode file is given), its keychain and the group.
    func open() throws -> (CryptoManager, ShareGroup) {
        let manager = try home.manager()
        try VaultCLI.unlock(manager, passcodeFile: passcodeFile, withoutFile: .stayLocked)
        let keychain = try Keychain(manager: manager)
        let group = ShareGroup(store: IdentityStore(keychain: keychain),
                               openingHardwareKey: try hardware.recordedKeyOpener(dataDirectory: home.directory), tcti: hardware.tcti)
        // A group of an older version gets its record now (docs/SECURITY.md, "Share group
        // items"). A failure (not a member, a tampered record) is reported by the command
        // that reads the group; `share init --replace` still starts a new one.
        try? group.upgradeIfNeeded()
        return (manager, group)
    }

    /// A key in hardware from `--key` or `--root-key`: the token key a `pkcs11:` URI names, or a
    /// key the TPM makes now (`tpm`, `tpm:pcrs=0,7`); nil without the option.
    func deviceKey(_ text: String?) throws -> (any HardwareSigningKey)? {
        guard let text else { return nil }
        return try hardware.openOrCreate(text, dataDirectory: home.directory)
    }

    func inbox(_ given: String?) -> String {
        given ?? home.directory + "/share-inbox"
    }
}

// MARK: init, invite, join, approve

enum ShareJSON {
    static func encode(_ value: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return Array(try encoder.encode(value)) + [0x0a]
    }

    static func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
        do { return try JSONDecoder().decode(type, from: Data(bytes)) } catch {
            throw ShareError.invalidEnrolment("the file does not parse: \(error)")
        }
    }
}

// MARK: serve, send
