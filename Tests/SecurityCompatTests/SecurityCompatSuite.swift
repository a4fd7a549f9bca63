#if os(Linux)
import Testing

/// Every compat suite runs inside this one, one test at a time: they share the process's environment (`setenv`
/// of the XDG directories) and its one default keychain client, as Apple-style code does.
@Suite("Apple compatibility (import Security)", .serialized)
enum SecurityCompatSuite {}
#endif
