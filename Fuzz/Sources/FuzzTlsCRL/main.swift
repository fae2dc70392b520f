import Foundation
import FuzzHarness

/// libFuzzer entry: one input to the tlsCRL target.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    FuzzHarness.tlsCRL(start.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? [])
    return 0
}

/// With FUZZ_WRITE_SEEDS=DIR, writes the target's generated seeds into DIR and exits.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> CInt {
    if let dir = ProcessInfo.processInfo.environment["FUZZ_WRITE_SEEDS"] {
        FuzzHarness.writeSeeds(for: "tlsCRL", to: dir)
        exit(0)
    }
    return 0
}
