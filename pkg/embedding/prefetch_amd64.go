package embedding

// prefetch asks the CPU to bring the cache line of each address in (PREFETCHT0). Unlike a load,
// a prefetch does not hold up the instructions after it, so a block's memory accesses can be in
// flight while the previous block is worked on. The addresses are only hints: any value is safe.
//
//go:noescape
func prefetch(addrs []uintptr)
