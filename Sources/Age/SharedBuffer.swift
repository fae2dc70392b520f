/// Pointers handed to the parallel chunk workers. Unchecked: each worker touches only the
/// disjoint region of its own chunk index, and `concurrentPerform` returns only when all are done.
struct SharedBuffer<Pointer>: @unchecked Sendable {
    let pointer: Pointer
}
