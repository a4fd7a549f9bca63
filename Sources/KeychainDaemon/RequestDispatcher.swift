import KeychainClient
import KeychainCore
import KeychainWire

/// Runs one request on the daemon's in-process service for one caller.
enum RequestDispatcher {
    static func handle(_ request: Request, service: any KeychainService, contexts: ConnectionContexts) -> Response {
        do throws(KeychainError) {
            switch request {
            case .resolve(let name): return .reference(service.resolve(name))
            case .defaultKeychain: return .reference(service.defaultKeychain())
            case .loginKeychain: return .reference(service.loginKeychain())
            case .searchList: return .references(service.searchList())
            case .setDefaultKeychain(let r): try service.setDefaultKeychain(r)
            case .setLoginKeychain(let r): try service.setLoginKeychain(r)
            case .setSearchList(let list): try service.setSearchList(list)
            case .state(let r): return .state(try service.state(of: r))
            case .createKeychain(let r, let password, let settings):
                try service.createKeychain(r, password: password, settings: settings)
            case .deleteKeychain(let r): try service.deleteKeychain(r)
            case .lock(let r): try service.lock(r)
            case .lockAll: service.lockAll()
            case .unlock(let r, let password): try service.unlock(r, password: password)
            case .settings(let r): return .settings(try service.settings(of: r))
            case .setSettings(let s, let r): try service.setSettings(s, of: r)
            case .changePassword(let r, let old, let new):
                return .count(try service.changePassword(of: r, old: old, new: new))
            case .add(let d, let r): return .found(try service.add(d, to: r))
            case .search(let d, let r): return .items(try service.search(d, in: r))
            case .update(let q, let a, let r): return .count(try service.update(q, with: a, in: r))
            case .delete(let d, let r): return .count(try service.delete(d, in: r))
            case .upsert(let q, let secret, let a, let r): try service.upsert(q, secret: secret, attributes: a, in: r)
            case .replaceAll(let m, let a, let r): return .count(try service.replaceAll(matching: m, with: a, in: r))
            case .allItems(let r, let secrets): return .items(try service.allItems(in: r, includingSecrets: secrets))
            case .session: return .done  // the server handles it: it sets the connection's prompter
            case .authenticateOwner(let password, let snapshot, let r):
                return .count(try service.authenticateOwner(password, for: contexts.context(snapshot), in: r) ? 1 : 0)
            }
            return .done
        } catch {
            return .failure(error)
        }
    }
}
