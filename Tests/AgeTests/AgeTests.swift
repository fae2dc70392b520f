import Foundation
import TestSupport
import Testing
import Crypto
import Cipher
@testable import Age

func pattern(_ count: Int, seed: UInt8 = 7) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: count)
    var x = UInt32(seed) &* 2654435761
    for i in 0..<count { x = x &* 1103515245 &+ 12345; out[i] = UInt8(truncatingIfNeeded: x >> 16) }
    return out
}

@Suite("age library")
struct AgeLibraryTests {
    static let sizes = [0, 1, 65535, 65536, 65537, 1 << 20 + 7, 3 * 65536]

    @Test("Bech32 known answers from the spec")
    func bech32() throws {
        let identity = try X25519Identity("AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX")
        #expect(identity.recipient.description == "age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj")
        let text = identity.encoded.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        #expect(text == "AGE-SECRET-KEY-1GFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPYYSJZGFPQ4EGAEX")
        #expect(throws: AgeError.self) { try X25519Recipient("age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwk") }
        #expect(throws: AgeError.self) { try X25519Recipient("Age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj") }
    }

    @Test("the hybrid identity from the spec gives a recipient that round-trips")
    func hybridKeys() throws {
        let identity = try MLKEM768X25519Identity("AGE-SECRET-KEY-PQ-1XX76JRALNLXDMEW0CRK45QMCCH4X06SE84UN3VPM33W6HWDX0H3SK3ZQFR")
        let recipient = identity.recipient.description
        #expect(recipient.hasPrefix("age1pq1x34nzsvr0rxjsgdn8zgyhfe8j7ceq5r9rdelkjuh3y235jzxshfg87pzf5zrqtzdxz95paef6caq5aapdmwjjqpjfdyxnzr2zampc3uxy0dg4z2n2gm9su72p0pc3u0jvev55l694v78snxg3yzvcl7yda0eyytqj6a0ec477lnhcy5hzpz4zq3pxanve4cn62gqj3pjy5lqj9c6kyj4v2z8alktn8zh99970x79gjkv7522hv9kfz35zsnxhsx8wwtmu9cy3ftzjgwcp4sshn3llnylnpdsyz5jm72vefv4x5vfwytrefxg4wq3mv42wcrvkj742479zrxzpvp2p3e9fed9f0739vcu80r7ma28qfhnvlv4gfzel9q654dj3zmuvvz893azhxdvs9fxd0r7jzchzcfcs5mkyyjxhw0n2z6dvp9yn9qfdp29h0azxqyjw6v7fhyuzj7zel0uq6j9rd7wgrpz7mf5dnj43jwsgvrc8qcnhy7tu6dkdujuxzkp9xj43xe8h92ktre2a3u3s8mm5mrp9nr9pwkgtz4mdlq9hgn4fps4k57ff6wddn2fy23t47sm20r8km8sd2pcyyafnet8f0dajsrlyjeah4n3mssr6aseevuuskdvq5lzguyvpgwpta742c6698vgutzqgny8usfg0w2he7kq5vyxjd0f9hqg8xk26y9e4th0gezq92q4cpp5p2y9hf5f2cje5l0c3sa3a2qxmm38pxxvhxh99yzmfz0zk7r2s64nnwjhkfgfr3gf8xnmppcgmaykvh5sh6g7vk9790rf8ws0axmr2t7z8aae5fq2029uvcn2ghgt4fu4wgwdc0k0cz52qkvwmuzj8p8k5jgf3xzk5zmrkavjekjrpeq408xz3zxazwkc6tyfmhayrkfpjhwtz5mp8j8guqe43k2q6m2kte03vrw27y3wmqyu5etmt9dnkwcnnpmu9gz9dekfhdevf42ucshphnrk38ra6hx8w5f8q5ru0xdhrjxmwqf6cused7zc5xvq43r0zscjglpwlptpwydhqw64xz7ptjdyeyzpq2zkxtmzg29gzjpvzva4d3l0cenn9xs297wf4y4ukwrunf57xj6pm7nvrkwvtrt8hwcmgv8x7ajw7258ugf9wvkmk4052ekg87tw5vnx8nq2swyzv77v8yqlwsenvamr0zssknwts8rrhfuwj7ykysnq9jxy0uv3kuyt22djszjdtvpz6d0s0kwh8ryynddzud92emeyvvyqktd0jtj7rvvg5gch25v8smlvny3kvn5gagyz475ze2y6q466xqmz2n3hs77lddeqyta2nch5k2u5yacuk9ywnwfdzvyejnucz724hj77hrrmakm7pr3kxsrxq22ejexlud9fy2kdqmkg5yncz7jm5wv2qjk5w5kvcpqsry2yqffh2la52dxfjkjq5rzhjzeyn6dupn0qwtyv7s4lwg3xdarsdlwe2y3tujy480y7z39q259fzx6jhd2j0f5hagqpcpees7hzc2yrk5cy788uk3s7qvp5cpepx24gvws3m2g433exgwppnkjscec8qu4y9z9r7vccexjcjaen42245lmgmxmuavg9alej92322gvvyy2t6267v09ch64y0m53jff0vjj96s0ypk60hr3jw4myd6m5hpn3xjstx7tl2szhpr5qe8jj08ydjc4wy2rch2fhuy3pdfjax5awe9j99ly5hkntzz9fe5zatgjvzdd0kgtxs25njnajyf6ssekp7gelxquusn4pt25czh3scj68kq79wdn5tgm6yvm9nzavrg043x3msnygf8dweknw5jmqd0uvny6ttsn09508k0c55zfnegrm9efhxpfqdkmhh6gjtqmwze9pyyzk3tlhl53k2ykx3qheyty7saeq0d3fzv49zc0k"))
        let parsed = try MLKEM768X25519Recipient(recipient)
        let file = try Age.encrypt(Array("post-quantum".utf8), recipients: [parsed])
        #expect(try Age.decrypt(file, identities: [identity]) == Array("post-quantum".utf8))
    }

    @Test("round trip at chunk boundaries, binary and armored, X25519", arguments: sizes)
    func roundTrip(size: Int) throws {
        let identity = X25519Identity.generate()
        let plaintext = pattern(size)
        for armor in [false, true] {
            let file = try Age.encrypt(plaintext, recipients: [identity.recipient], armor: armor)
            let expectedChunks = max(1, (size + 65535) / 65536)
            if !armor {
                let header = AgeHeader.versionLine.count
                #expect(file.count > header + 16 + size + 16 * expectedChunks)
            }
            #expect(try Age.decrypt(file, identities: [identity]) == plaintext)
            #expect(throws: AgeError.noMatchingIdentity("the file is for 1 recipient(s) of type X25519")) {
                try Age.decrypt(file, identities: [X25519Identity.generate()])
            }
        }
    }

    @Test("several recipients: each identity opens the file")
    func severalRecipients() throws {
        let a = X25519Identity.generate(), b = X25519Identity.generate(), c = try MLKEM768X25519Identity.generate()
        let file = try Age.encrypt(pattern(1000), recipients: [a.recipient, b.recipient, c.recipient])
        for identity in [a, b, c] as [any AgeIdentity] { #expect(try Age.decrypt(file, identities: [identity]) == pattern(1000)) }
    }

    @Test("scrypt: round trip, wrong passphrase is no match, must be alone")
    func scrypt() throws {
        let passphrase = SecretBytes(utf8: "correct horse")
        let recipient = ScryptRecipient(passphrase: passphrase, logN: 10)
        let file = try Age.encrypt(pattern(70000), recipients: [recipient])
        #expect(try Age.decrypt(file, identities: [ScryptIdentity(passphrase: passphrase)]) == pattern(70000))
        #expect(throws: AgeError.self) { try Age.decrypt(file, identities: [ScryptIdentity(passphrase: SecretBytes(utf8: "wrong"))]) }
        #expect(throws: AgeError.invalidArgument("a passphrase (scrypt) recipient cannot be combined with other recipients")) {
            try Age.encrypt([1], recipients: [recipient, X25519Identity.generate().recipient])
        }
        // The policy's work factor is written to the header.
        let policyRecipient = try ScryptRecipient(passphrase: passphrase, policy: .interactive)
        #expect(policyRecipient.logN == 16)
        #expect(throws: AgeError.self) { try ScryptRecipient(passphrase: passphrase, policy: .fipsInteractive) }
    }

    @Test("parallel output is byte-identical to a sequential run with the same file key and nonce")
    func parallelDeterminism() throws {
        let identity = X25519Identity.generate()
        let fileKey = SecretBytes(copying: pattern(16, seed: 1))
        let nonce = pattern(16, seed: 2)
        let plaintext = pattern(5 * 65536 * 7 + 123)
        // Header stanzas are random (ephemeral share), so compare the payloads after the header.
        func payload(parallel: Bool, batch: Int) throws -> [UInt8] {
            var out = [UInt8]()
            let encryptor = try AgeEncryptor(recipients: [identity.recipient], armor: false, fileKey: fileKey, nonce: nonce,
                                             batchChunks: batch, parallel: parallel) { out += $0 }
            var offset = 0
            while offset < plaintext.count {
                let end = min(plaintext.count, offset + 100_000)
                try encryptor.update(plaintext[offset..<end])
                offset = end
            }
            try encryptor.finish()
            let marker = Array("---".utf8)
            var headerEnd = 0
            for i in 0..<(out.count - 3) where Array(out[i..<(i + 3)]) == marker {
                headerEnd = out[i...].firstIndex(of: 0x0A)! + 1
                break
            }
            return Array(out[headerEnd...])
        }
        let sequential = try payload(parallel: false, batch: 1)
        #expect(try payload(parallel: true, batch: 32) == sequential)
        #expect(try payload(parallel: true, batch: 3) == sequential)
        #expect(sequential.count == 16 + plaintext.count + 16 * ((plaintext.count + 65535) / 65536))
    }

    @Test("the descriptor pipeline writes the bytes of a sequential run, from a file or a pipe, with up to 16 workers", arguments: [0, 1, 65535, 65536, 65537, 4 * 65536, 5 * 65536 * 7 + 123])
    func pipelineDeterminism(size: Int) throws {
        let identity = X25519Identity.generate()
        let fileKey = SecretBytes(copying: pattern(16, seed: 1))
        let nonce = pattern(16, seed: 2)
        let plaintext = pattern(size)
        func payload(_ file: [UInt8]) -> [UInt8] {
            let marker = Array("\n--- ".utf8)
            var i = 0
            while Array(file[i..<(i + marker.count)]) != marker { i += 1 }
            return Array(file[(file[(i + 1)...].firstIndex(of: 0x0A)! + 1)...])
        }
        var sequentialFile = [UInt8]()
        let sequential = try AgeEncryptor(recipients: [identity.recipient], armor: false, fileKey: fileKey, nonce: nonce,
                                          batchChunks: 1, parallel: false) { sequentialFile += $0 }
        try sequential.update(plaintext)
        try sequential.finish()
        let expected = payload(sequentialFile)
        #expect(expected.count == 16 + plaintext.count + 16 * max(1, (plaintext.count + 65535) / 65536))

        let temporary = try TemporaryDirectory(prefix: "sf-pipeline")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        try Data(plaintext).write(to: URL(fileURLWithPath: dir + "/plain"))
        for (slots, workers, fromPipe) in [(4, 2, false), (16, 2, true), (4, 3, true), (16, 1, false), (16, 16, true)] {
            let output = open(dir + "/out", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            var input = open(dir + "/plain", O_RDONLY)
            var feeder: Thread?
            if fromPipe {
                // Feed the plaintext through a pipe in uneven writes (short reads on the other side).
                var fds: [Int32] = [0, 0]
                #expect(pipe(&fds) == 0)
                close(input)
                input = fds[0]
                let writeEnd = fds[1]
                let bytes = plaintext
                feeder = Thread {
                    var offset = 0, step = 1000
                    while offset < bytes.count {
                        let n = min(step, bytes.count - offset)
                        _ = bytes.withUnsafeBytes { write(writeEnd, $0.baseAddress! + offset, n) }
                        offset += n
                        step = step * 2 + 333
                    }
                    close(writeEnd)
                }
                feeder?.start()
            }
            let start = try PayloadStart.make(recipients: [identity.recipient], fileKey: fileKey, nonce: nonce)
            try start.bytes.withUnsafeBytes { try AgeIO.writeAll(output, $0) }
            var reported: Int64 = 0
            try ChunkPipeline(direction: .seal, input: input, output: output, cipher: start.cipher, slots: slots).run(workers: workers) { reported = $0 }
            close(input)
            close(output)
            let file = Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/out")))
            #expect(payload(file) == expected, "slots \(slots), workers \(workers), pipe \(fromPipe)")
            #expect(reported == Int64(size))
            // And back through the decrypting pipeline.
            let back = try Age.decrypt(file, identities: [identity])
            #expect(back == plaintext)
        }
    }

    @Test("payload failure releases only the verified chunks")
    func payloadFailureReleasesVerifiedOnly() throws {
        let identity = X25519Identity.generate()
        let plaintext = pattern(3 * 65536 + 10)
        var file = try Age.encrypt(plaintext, recipients: [identity.recipient])
        let payloadStart = file.count - (plaintext.count + 4 * 16)
        file[payloadStart + 65552 + 100] ^= 1  // damage the second chunk
        var released = [UInt8]()
        let decryptor = AgeDecryptor(identities: [identity]) { released += $0 }
        #expect(throws: AgeError.payloadFailure("chunk 1 does not authenticate")) {
            try decryptor.update(file)
            try decryptor.finish()
        }
        #expect(released == Array(plaintext[0..<65536]))
        // Truncation at a chunk boundary is detected.
        let truncated = Array(try Age.encrypt(plaintext, recipients: [identity.recipient]).dropLast(26))
        #expect(throws: AgeError.self) { try Age.decrypt(truncated, identities: [identity]) }
    }

    @Test("header MAC failure is its own category")
    func headerMAC() throws {
        let identity = X25519Identity.generate()
        var file = try Age.encrypt(pattern(10), recipients: [identity.recipient])
        // Add a grease stanza before the MAC line: the MAC no longer matches.
        let text = String(decoding: file, as: UTF8.self)
        let range = text.range(of: "\n---")!
        let start = text.utf8.distance(from: text.startIndex, to: range.lowerBound) + 1
        file.insert(contentsOf: Array("-> grease x\n\n".utf8), at: start)
        #expect(throws: AgeError.headerMACFailure) { try Age.decrypt(file, identities: [identity]) }
    }

    @Test("random access reads any range without decrypting the whole file")
    func randomAccess() throws {
        let temporary = try TemporaryDirectory(prefix: "age-tests")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let identity = X25519Identity.generate()
        let plaintext = pattern(4 * 65536 + 999)
        let path = dir + "/f.age"
        try SecureFile.writeAtomically(try Age.encrypt(plaintext, recipients: [identity.recipient]), to: path)
        let reader = try AgeRandomAccessReader(path: path, identities: [identity])
        #expect(reader.plaintextSize == Int64(plaintext.count))
        for (offset, count) in [(0, 10), (65530, 20), (65536, 65536), (4 * 65536 + 900, 500), (0, plaintext.count), (plaintext.count, 5)] {
            let expected = Array(plaintext[offset..<min(plaintext.count, offset + count)])
            #expect(try reader.read(offset: Int64(offset), count: count) == expected)
        }
        // A damaged chunk fails only the reads that touch it.
        var damaged = try SecureFile.read(path)
        damaged[damaged.count - plaintext.count - 5 * 16 + 16 + 65552 * 2 + 7] ^= 0x80
        try SecureFile.writeAtomically(damaged, to: path)
        let reader2 = try AgeRandomAccessReader(path: path, identities: [identity])
        #expect(try reader2.read(offset: 0, count: 100) == Array(plaintext[0..<100]))
        #expect(throws: AgeError.payloadFailure("chunk 2 does not authenticate")) { try reader2.read(offset: 2 * 65536 + 5, count: 1) }
        // Armored files are refused.
        try SecureFile.writeAtomically(try Age.encrypt(plaintext, recipients: [identity.recipient], armor: true), to: path)
        #expect(throws: AgeError.self) { try AgeRandomAccessReader(path: path, identities: [identity]) }
    }

    @Test("file to file is atomic: a failure leaves no destination")
    func fileToFile() throws {
        let temporary = try TemporaryDirectory(prefix: "age-tests")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let identity = X25519Identity.generate()
        let plaintext = pattern(200_000)
        try SecureFile.writeAtomically(plaintext, to: dir + "/plain")
        try Age.encryptFile(at: dir + "/plain", to: dir + "/plain.age", recipients: [identity.recipient])
        var info = stat()
        #expect(stat(dir + "/plain.age", &info) == 0 && info.st_mode & 0o777 == 0o600)
        try Age.decryptFile(at: dir + "/plain.age", to: dir + "/out", identities: [identity])
        #expect(try SecureFile.read(dir + "/out") == plaintext)
        // A damaged last chunk: the destination is not created, and no temporary file remains.
        var file = try SecureFile.read(dir + "/plain.age")
        file[file.count - 3] ^= 1
        try SecureFile.writeAtomically(file, to: dir + "/bad.age")
        #expect(throws: AgeError.self) { try Age.decryptFile(at: dir + "/bad.age", to: dir + "/bad.out", identities: [identity]) }
        #expect(!FileManager.default.fileExists(atPath: dir + "/bad.out"))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".tmp") }
        #expect(leftovers.isEmpty)
        #expect(throws: AgeError.self) { try Age.encryptFile(at: dir + "/plain", to: dir + "/plain", recipients: [identity.recipient]) }
    }

    @Test("descriptor to file: a pipe's bytes land atomically, a failure keeps the old destination")
    func descriptorToFile() throws {
        let temporary = try TemporaryDirectory(prefix: "age-tests")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let identity = X25519Identity.generate()
        let plaintext = pattern(3 * 65536 + 11)
        // A reader that stops early closes the pipe under the feeder: EPIPE, not a signal.
        signal(SIGPIPE, SIG_IGN)
        /// Runs `body` with the read end of a pipe fed from another thread, like standard input;
        /// the read end is closed and the feeder finished when it returns.
        func withPipe(of bytes: [UInt8], _ body: (Int32) throws -> Void) throws {
            var fds: [Int32] = [0, 0]
            try #require(pipe(&fds) == 0)
            let writeEnd = fds[1]
            let done = DispatchSemaphore(value: 0)
            Thread {
                var offset = 0
                while offset < bytes.count {
                    let n = bytes.withUnsafeBytes { write(writeEnd, $0.baseAddress! + offset, min(10_000, bytes.count - offset)) }
                    if n <= 0 { break }
                    offset += n
                }
                close(writeEnd)
                done.signal()
            }.start()
            defer {
                close(fds[0])
                done.wait()
            }
            try body(fds[0])
        }
        try withPipe(of: plaintext) { try Age.encrypt(from: $0, toFile: dir + "/p.age", recipients: [identity.recipient]) }
        var info = stat()
        #expect(stat(dir + "/p.age", &info) == 0 && info.st_mode & 0o777 == 0o600)
        let sealed = try SecureFile.read(dir + "/p.age")
        #expect(try Age.decrypt(sealed, identities: [identity]) == plaintext)

        try withPipe(of: sealed) { try Age.decrypt(from: $0, toFile: dir + "/back", identities: [identity]) }
        #expect(try SecureFile.read(dir + "/back") == plaintext)

        // A damaged second chunk (chunk 1): the first chunk authenticates, but the existing
        // destination keeps its old bytes and no temporary file remains.
        var damaged = sealed
        damaged[damaged.count - 2 * 65536] ^= 1
        try withPipe(of: damaged) { input in
            #expect(throws: AgeError.payloadFailure("chunk 1 does not authenticate")) {
                try Age.decrypt(from: input, toFile: dir + "/back", identities: [identity])
            }
        }
        #expect(try SecureFile.read(dir + "/back") == plaintext)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".tmp") }.isEmpty)

        // Encrypting a file onto itself through a descriptor is refused, the file untouched.
        let fd = open(dir + "/back", O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        #expect(throws: AgeError.invalidArgument("\(dir)/back is the source file; use encryptFileInPlace(at:recipients:) to replace it")) {
            try Age.encrypt(from: fd, toFile: dir + "/back", recipients: [identity.recipient])
        }
        #expect(try SecureFile.read(dir + "/back") == plaintext)
    }

    @Test("async byte sequences")
    func asyncSequences() async throws {
        let identity = X25519Identity.generate()
        let plaintext = pattern(150_000)
        let pieces = stride(from: 0, to: plaintext.count, by: 7000).map { Array(plaintext[$0..<min(plaintext.count, $0 + 7000)]) }
        let stream = AsyncStream<[UInt8]> { continuation in
            for piece in pieces { continuation.yield(piece) }
            continuation.finish()
        }
        var encrypted = [UInt8]()
        try await Age.encrypt(stream, recipients: [identity.recipient], armor: true) { encrypted += $0 }
        let bytes = AsyncStream<UInt8> { continuation in
            for b in encrypted { continuation.yield(b) }
            continuation.finish()
        }
        var decrypted = [UInt8]()
        try await Age.decrypt(bytes, identities: [identity]) { decrypted += $0 }
        #expect(decrypted == plaintext)
    }
}

@Suite("age in place")
struct AgeInPlaceTests {
    @Test("in-place encryption replaces the plaintext atomically and shreds the old inode")
    func inPlace() throws {
        let temporary = try TemporaryDirectory(prefix: "age-tests")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        let identity = X25519Identity.generate()
        let plaintext = pattern(300_000)
        let path = dir + "/doc"
        try SecureFile.writeAtomically(plaintext, to: path)
        var before = stat()
        _ = stat(path, &before)
        let report = try Age.encryptFileInPlace(at: path, recipients: [identity.recipient])
        var after = stat()
        _ = stat(path, &after)
        #expect(before.st_ino != after.st_ino)
        #expect(report.bytesOverwritten >= UInt64(plaintext.count))
        #expect(!report.removed)
        let file = try SecureFile.read(path)
        #expect(file.starts(with: Array("age-encryption.org/v1\n".utf8)))
        #expect(try Age.decrypt(file, identities: [identity]) == plaintext)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir)
        #expect(leftovers == ["doc"])
    }
}

@Suite("age hostile input")
struct AgeHostileInputTests {
    @Test("random corruption and truncation never crash and always fail with an AgeError")
    func mutations() throws {
        let identity = X25519Identity.generate()
        let plaintext = pattern(70_000)
        for armor in [false, true] {
            let file = try Age.encrypt(plaintext, recipients: [identity.recipient], armor: armor)
            var generator = SystemRandomNumberGenerator()
            for round in 0..<150 {
                var mutated = file
                switch round % 3 {
                case 0: mutated[Int.random(in: 0..<mutated.count, using: &generator)] ^= UInt8.random(in: 1...255, using: &generator)
                case 1: mutated = Array(mutated.prefix(Int.random(in: 0..<mutated.count, using: &generator)))
                default: mutated.insert(UInt8.random(in: 0...255, using: &generator), at: Int.random(in: 0...mutated.count, using: &generator))
                }
                var pushOutcome = "success"
                do throws(AgeError) {
                    let result = try Age.decrypt(mutated, identities: [identity])
                    // Only a change the format ignores may still decrypt (e.g. armor whitespace).
                    #expect(result == plaintext)
                } catch {
                    pushOutcome = "\(error)"
                }
                // The descriptor path (the chunk pipeline for binary payloads) agrees, and writes
                // only a verified prefix of the plaintext.
                let (outcome, written) = try descriptorDecrypt(mutated, identity)
                #expect(outcome == pushOutcome, "round \(round), armor \(armor)")
                #expect(written == Array(plaintext.prefix(written.count)))
            }
        }
    }

    func descriptorDecrypt(_ file: [UInt8], _ identity: X25519Identity) throws -> (String, [UInt8]) {
        let temporary = try TemporaryDirectory(prefix: "sf-mut")
        defer { withExtendedLifetime(temporary) {} }
        let dir = temporary.path
        try Data(file).write(to: URL(fileURLWithPath: dir + "/in"))
        let input = open(dir + "/in", O_RDONLY)
        let output = open(dir + "/out", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer { close(input); close(output) }
        var outcome = "success"
        do throws(AgeError) { try Age.decrypt(from: input, to: output, identities: [identity]) } catch { outcome = "\(error)" }
        return (outcome, Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/out"))))
    }
}
