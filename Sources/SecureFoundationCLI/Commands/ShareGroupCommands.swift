import AgeCommandLine
import ArgumentParser
import DeviceSharing
import Foundation
import HardwareKeys
import PinnedTLS
import SecureFoundation

struct ShareInitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Make this machine a member: a new group (--new-group), or join one with an invitation.",
        discussion: """
        --new-group creates the group's root (its key stays in this keychain, whenUnlocked) and \
        this device's certificate. With --invitation FILE it is `share join FILE`. With --key \
        pkcs11:… (token and key attributes only, with --module and the token's PIN) this \
        device's key is that token key: it never leaves the token, and every sharing command \
        that connects needs --module and the PIN. With --key tpm (or tpm:pcrs=0,7) the TPM \
        (--tcti or $TPM2TOOLS_TCTI) makes this device's key; its blobs are kept in the keychain \
        and every sharing command that connects signs in that TPM (give --tcti). \
        --root-key takes the same forms for the group root's key (with --new-group): the root \
        is self-signed there, and `share approve` and `share invite --listen` sign the devices' \
        certificates there.

        Examples:
          securefoundation share init --new-group --name laptop \\
              --passcode-file pass.txt
          securefoundation share init --invitation invite.json --name desktop \\
              -o request.json --passcode-file pass.txt
        """
    )

    @Flag(name: .customLong("new-group"), help: "Create a new group with this machine as its first member.")
    var newGroup = false

    @Option(name: .customLong("invitation"), help: "Join with this invitation (as `share join`).")
    var invitation: String?

    @Option(name: .customLong("name"), help: "This device's name (letters, digits, hyphens).")
    var name: String

    @Option(name: .customLong("group-name"), help: "The root's common name.")
    var groupName = "SecureFoundation sharing group"

    @Option(name: [.customShort("o"), .customLong("output")], help: "With --invitation: where to write the request (default stdout).")
    var output: String?

    @Flag(name: .customLong("replace"), help: "Replace this machine's group.")
    var replace = false

    @Option(name: .customLong("key"), help: "This device's key: the key in a PKCS #11 token this pkcs11: URI names, or a key the TPM makes: tpm or tpm:pcrs=0,7 (it never leaves the token or TPM).")
    var tokenKey: String?

    @Option(name: .customLong("root-key"), help: "With --new-group: the group root's key, in a token (pkcs11:…) or made by the TPM (tpm, tpm:pcrs=0,7).")
    var rootKey: String?

    @OptionGroup var options: ShareOptions

    func validate() throws {
        try HardwareKeyOptions.validateKey(tokenKey)
        try HardwareKeyOptions.validateKey(rootKey, option: "--root-key")
        if rootKey != nil && !newGroup { throw ValidationError("--root-key goes with --new-group") }
    }

    func run() throws {
        do {
            if let invitation {
                try ShareJoinCommand.join(invitation: invitation, name: name, output: output, tokenKey: tokenKey, options: options)
                return
            }
            guard newGroup else { throw ValidationError("give --new-group to create a group, or --invitation FILE to join one") }
            let (_, group) = try options.open()
            let membership = try group.create(deviceName: name, groupName: groupName, replace: replace,
                                              deviceKey: try options.deviceKey(tokenKey), rootKey: try options.deviceKey(rootKey))
            print("group root: \(membership.root.subject)")
            print("root pin: \(try ShareGroup.pin(membership.root))")
            print("device: \(membership.deviceName)")
            print("device pin: \(try ShareGroup.pin(membership.identity.leaf))")
        } catch {
            throw ShareCLI.fail(error)
        }
    }
}

struct ShareInviteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "invite",
        abstract: "Write a one-time, short-lived invitation for a new device (on the machine holding the group root).",
        usage: "securefoundation share invite [options] [--listen HOST:PORT] [-o OUTPUT]",
        discussion: """
        The invitation holds the group root certificate, a one-time secret and an expiry: carry \
        it to the new machine privately (whoever has it can enrol one device until it expires). \
        With --listen HOST:PORT, this machine then waits for the new device to join over the \
        network (`share join INVITATION --name NAME --connect HOST:PORT`): it prints `listening \
        on HOST:PORT`, then `enrolled DEVICE` and exits 0; exit 52 if the invitation expires \
        first or 10 requests were refused.

        Examples:
          securefoundation share invite -o invite.json --passcode-file pass.txt
          securefoundation share invite -o invite.json --minutes 15 \\
              --listen 0.0.0.0:7444 --passcode-file pass.txt
        """
    )

    @Option(name: .customLong("listen"), help: "Wait for the device to join over the network on HOST:PORT (port 0: any free port).")
    var listen: String?

    @Option(name: [.customShort("o"), .customLong("output")], help: "Where to write the invitation (default stdout).")
    var output: String?

    @Option(name: .customLong("minutes"), help: "How long the invitation is valid (1...1440).")
    var minutes = 60

    @OptionGroup var options: ShareOptions

    func run() async throws {
        do {
            guard (1...1440).contains(minutes) else { throw ValidationError("--minutes must be 1...1440") }
            let address = try listen.map { try ShareCLI.address($0, option: "--listen") }
            if address != nil && output == nil {
                throw ValidationError("with --listen, write the invitation to a file with -o (standard output carries the progress)")
            }
            let (_, group) = try options.open()
            let membership = try address.map { _ in try group.membership() }
            let enrolment = ShareEnrolment(group: group)
            let invitation = try enrolment.invite(validity: TimeInterval(minutes) * 60)
            try CLI.writeOutput(try ShareJSON.encode(invitation), to: output)
            CLI.warn("invitation \(invitation.id), valid for \(minutes) minutes")
            guard let (host, port) = address, let membership else { return }
            let server = try await ShareEnrolmentServer.bind(host: host, port: port, membership: membership, enrolment: enrolment)
            print("listening on \(host):\(server.port) for invitation \(invitation.id)")
            ShareCLI.flushStdout()
            let device = try await server.run(until: Date(timeIntervalSince1970: TimeInterval(invitation.expires)), onEvent: { event in
                if case let .refused(peer, error) = event { CLI.warn("securefoundation: refused \(peer): \(error)") }
            })
            print("enrolled \(device)")
        } catch {
            throw ShareCLI.fail(error)
        }
    }
}

struct ShareJoinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "join",
        abstract: "Join a group: with an invitation, write a request; with --certificate, store the certificate approved.",
        discussion: """
        Step 1: `share join INVITATION --name DEVICE -o request.json` stores the group root as \
        this machine's only sharing anchor, makes this device's key (kept in the keychain) and \
        writes a request authenticated by the invitation's secret. Give the request to the \
        inviter, who runs `share approve`. Step 2: `share join --certificate FILE` checks the \
        certificate (issued by the root, for this key) and stores the identity. Over the \
        network, in one step: `share join INVITATION --name DEVICE --connect HOST:PORT` while \
        the inviter runs `share invite --listen`; only a machine of the invitation's group is \
        trusted there, and the secret is proven, never sent. With --key pkcs11:… (and --module \
        and the token's PIN) this device's key is that token key, never a new keychain key; give \
        --module and the PIN to step 2 too. With --key tpm (or tpm:pcrs=0,7) the TPM (--tcti or \
        $TPM2TOOLS_TCTI) makes this device's key; give --tcti to step 2 too.

        Examples:
          securefoundation share join invite.json --name desktop -o request.json \\
              --passcode-file pass.txt
          securefoundation share join --certificate desktop.pem \\
              --passcode-file pass.txt
          securefoundation share join invite.json --name desktop \\
              --connect 192.168.1.10:7444 --passcode-file pass.txt
        """
    )

    @Option(name: .customLong("connect"), help: "Join over the network: the inviter's HOST:PORT (`share invite --listen`).")
    var connect: String?

    @Argument(help: "The invitation file.")
    var invitation: String?

    @Option(name: .customLong("name"), help: "This device's name.")
    var name: String?

    @Option(name: .customLong("certificate"), help: "The certificate chain the inviter approved (PEM).")
    var certificate: String?

    @Option(name: [.customShort("o"), .customLong("output")], help: "Where to write the request (default stdout).")
    var output: String?

    @Option(name: .customLong("key"), help: "This device's key: the key in a PKCS #11 token this pkcs11: URI names, or a key the TPM makes: tpm or tpm:pcrs=0,7 (it never leaves the token or TPM).")
    var tokenKey: String?

    @OptionGroup var options: ShareOptions

    func validate() throws {
        try HardwareKeyOptions.validateKey(tokenKey)
    }

    func run() async throws {
        do {
            if let connect {
                let (host, port) = try ShareCLI.address(connect, option: "--connect")
                guard let invitation, let name, certificate == nil else {
                    throw ValidationError("--connect needs INVITATION and --name (and no --certificate)")
                }
                let parsed = try ShareJSON.decode(ShareEnrolment.Invitation.self, from: try CLI.readInput(invitation, maxLength: 1 << 20))
                let (_, group) = try options.open()
                let membership = try await ShareEnrolment(group: group).join(invitation: parsed, deviceName: name, host: host, port: port,
                                                                             deviceKey: try options.deviceKey(tokenKey))
                print("device: \(membership.deviceName)")
                print("device pin: \(try ShareGroup.pin(membership.identity.leaf))")
                return
            }
            if let certificate {
                let (_, group) = try options.open()
                let pem = try CLI.readInput(certificate, maxLength: 1 << 20)
                let membership = try ShareEnrolment(group: group).complete(chainPEM: pem)
                print("device: \(membership.deviceName)")
                print("device pin: \(try ShareGroup.pin(membership.identity.leaf))")
                return
            }
            guard let invitation, let name else { throw ValidationError("give INVITATION and --name, or --certificate FILE") }
            try Self.join(invitation: invitation, name: name, output: output, tokenKey: tokenKey, options: options)
        } catch {
            throw ShareCLI.fail(error)
        }
    }

    static func join(invitation path: String, name: String, output: String?, tokenKey: String?, options: ShareOptions) throws {
        let invitation = try ShareJSON.decode(ShareEnrolment.Invitation.self, from: try CLI.readInput(path, maxLength: 1 << 20))
        let (_, group) = try options.open()
        let request = try ShareEnrolment(group: group).join(invitation: invitation, deviceName: name,
                                                            deviceKey: try options.deviceKey(tokenKey))
        try CLI.writeOutput(try ShareJSON.encode(request), to: output)
        CLI.warn("request written: give it to the inviter (`share approve`), then run `share join --certificate FILE`")
    }
}

struct ShareApproveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "approve",
        abstract: "Issue the certificate of a device that joined with one of this machine's invitations.",
        usage: "securefoundation share approve [options] [-o OUTPUT] REQUEST",
        discussion: """
        Checks the request (written by `share join INVITATION`) against the invitation of this \
        machine it answers (unused, not expired), then writes the device's certificate chain: \
        give it to that device, which runs `share join --certificate FILE`.

        Example:
          securefoundation share approve request.json -o desktop.pem \\
              --passcode-file pass.txt
        """
    )

    @Argument(help: "The request file.")
    var request: String

    @Option(name: [.customShort("o"), .customLong("output")], help: "Where to write the certificate chain (default stdout).")
    var output: String?

    @OptionGroup var options: ShareOptions

    func run() throws {
        do {
            let request = try ShareJSON.decode(ShareEnrolment.Request.self, from: try CLI.readInput(self.request, maxLength: 1 << 20))
            let (_, group) = try options.open()
            let pem = try ShareEnrolment(group: group).approve(request: request)
            try CLI.writeOutput(Array(pem.utf8), to: output)
            CLI.warn("approved device \(request.device)")
        } catch {
            throw ShareCLI.fail(error)
        }
    }
}

struct ShareRevokeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Refuse a device from now on (by the name it enrolled with here, or its sha256/ pin).",
        usage: "securefoundation share revoke [options] (DEVICE | sha256/PIN)",
        discussion: """
        The revocation list is a keychain item of this machine (always class, MAC'd like every \
        item): run revoke on every member that should refuse the device.

        Examples:
          securefoundation share list --devices
          securefoundation share revoke desktop
        """
    )

    @Argument(help: "The device name or sha256/ pin.")
    var device: String

    @OptionGroup var options: ShareOptions

    func run() throws {
        do {
            let (_, group) = try options.open()
            for record in try group.revoke(device: device) {
                print("revoked \(record.device) \(record.pin)")
            }
        } catch {
            throw ShareCLI.fail(error)
        }
    }
}
