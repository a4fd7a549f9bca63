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
        case .add(let q, let r): .add(substitute(q), r)
        case .search(let q, let r): .search(substitute(q), r)
        case .firstMatch(let q): .firstMatch(substitute(q))
        case .update(let q, let u, let r): .update(substitute(q), u, r)
        case .delete(let q, let r): .delete(substitute(q), r)
        case .upsert(let q, let u, let r): .upsert(substitute(q), u, r)
        case .replaceAll(let m, let q, let r): .replaceAll(substitute(m), substitute(q), r)
        case .useKey(let q, let use, let r): .useKey(substitute(q), use, r)
        case .certificates(let q, let r): .certificates(substitute(q), r)
        case .generateKeyPair(let g, let r): .generateKeyPair(substitute(g), r)
        default: request
        }
    }

    private func substitute(_ generation: KeyGeneration) -> KeyGeneration {
        var out = generation
        out.privateAttributes = substitute(generation.privateAttributes)
        return out
    }

    private func substitute(_ query: ItemQuery) -> ItemQuery {
        guard let standIn = query.authenticationContext else { return query }
        var out = query
        out.authenticationContext = context(standIn.snapshot)
        return out
    }

    private func substitute(_ dictionary: [String: QueryValue]) -> [String: QueryValue] {
        guard case .authenticationContext(let standIn) = dictionary["u_AuthCtx"] else { return dictionary }
        var out = dictionary
        out["u_AuthCtx"] = .authenticationContext(context(standIn.snapshot))
        return out
    }
}
