import Foundation
import KeychainCore
import KeychainWire

/// The authentication contexts (LAContext) of one connection, kept by the daemon under the ids the client names.
///
/// A client sends its context's settings at each call; whether the owner has proved presence lives only here, so no
/// client can declare a context authenticated. At most 256 per connection (the oldest goes first).
final class ConnectionContexts {
    private var contexts: [UUID: AuthenticationContext] = [:]
    private var order: [UUID] = []

    /// The daemon's context of that id, brought up to date with the client's settings.
    func context(_ snapshot: AuthenticationContext.Snapshot) -> AuthenticationContext {
        if let known = contexts[snapshot.id] {
            known.adopt(snapshot)
            return known
        }
        // No prompter of its own: the connection's Asker decides where questions go, never a context.
        let made = AuthenticationContext(id: snapshot.id)
        made.adopt(snapshot)
        contexts[snapshot.id] = made
        order.append(snapshot.id)
        if order.count > 256 { contexts.removeValue(forKey: order.removeFirst()) }
        return made
    }

    /// The request with every context stand-in replaced by the daemon's own context of that id.
    func substitute(_ request: Request) -> Request {
        switch request {
        case .add(let d, let r): .add(substitute(d), r)
        case .search(let d, let r): .search(substitute(d), r)
        case .update(let q, let a, let r): .update(substitute(q), a, r)
        case .delete(let d, let r): .delete(substitute(d), r)
        case .upsert(let q, let secret, let a, let r): .upsert(substitute(q), secret: secret, a, r)
        case .replaceAll(let m, let a, let r): .replaceAll(substitute(m), substitute(a), r)
        case .useKey(let d, let use, let r): .useKey(substitute(d), use, r)
        case .generateKeyPair(let g, let r): .generateKeyPair(substitute(g), r)
        default: request
        }
    }

    private func substitute(_ generation: KeyGeneration) -> KeyGeneration {
        var out = generation
        out.privateAttributes = substitute(generation.privateAttributes)
        return out
    }

    private func substitute(_ dictionary: [String: QueryValue]) -> [String: QueryValue] {
        guard case .authenticationContext(let standIn) = dictionary["u_AuthCtx"] else { return dictionary }
        var out = dictionary
        out["u_AuthCtx"] = .authenticationContext(context(standIn.snapshot))
        return out
    }
}
