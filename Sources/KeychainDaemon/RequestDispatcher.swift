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
            case .searchListStates: return .listedKeychains(try service.listedKeychains())
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
            case .firstMatch(let d): return .listMatch(try service.firstMatch(d))
            case .update(let q, let u, let r): return .count(try service.update(q, with: u, in: r))
            case .delete(let d, let r): return .count(try service.delete(d, in: r))
            case .upsert(let q, let u, let r): try service.upsert(q, changes: u, in: r)
            case .replaceAll(let m, let a, let r): return .count(try service.replaceAll(matching: m, with: a, in: r))
            case .allItems(let r, let secrets): return .items(try service.allItems(in: r, includingSecrets: secrets))
            case .useKey(let d, let use, let r): return .secret(try service.useKey(d, use, in: r))
            case .generateKeyPair(let g, let r): return .keyPair(try service.generateKeyPair(g, in: r))
            case .importItems(let i, let r): return .items(try service.importItems(i, into: r))
            case .exportItems(let e, let r): return .secret(try service.exportItems(e, from: r))
            case .certificates(let d, let r): return .certificates(try service.certificates(d, in: r))
            case .backUp(let r, let path, let password):
                return .backupReport(try service.backUp(r, to: path, password: password))
            case .restore(let path, let password, let r):
                return .backupReport(try service.restore(from: path, password: password, into: r))
            case .importSecrets(let request, let r): return .importReport(try service.importSecrets(request, into: r))
            case .sync(let request, let r): return .syncReport(try service.sync(request, keychain: r))
            case .accessLog(let request): return .accessLogReport(try service.accessLog(request))
            case .session, .subscribe, .serveSecretService, .trustProgram: return .done  // the server's: prompter, events, the bus
            case .authenticateOwner(let password, let snapshot, let r):
                return .count(try service.authenticateOwner(password, for: contexts.context(snapshot), in: r) ? 1 : 0)
            }
            return .done
        } catch {
            return .failure(error)
        }
    }

    /// The event a request that succeeded causes, if any, for `SecKeychainAddCallback` subscribers.
    static func event(of request: Request, service: any KeychainService, pid: Int32) -> KeychainEvent? {
        func on(_ kind: KeychainEvent.Kind, _ keychain: KeychainReference?) -> KeychainEvent {
            KeychainEvent(kind: kind, keychain: (keychain ?? service.defaultKeychain()).path, pid: pid)
        }
        switch request {
        case .add(_, let r), .upsert(_, _, let r), .replaceAll(_, _, let r), .generateKeyPair(_, let r),
             .importItems(_, let r): return on(.add, r)
        case .restore(_, _, let r): return on(.add, r)
        case .importSecrets(let request, let r): return request.dryRun ? nil : on(.add, r)
        case .update(_, _, let r): return on(.update, r)
        case .delete(_, let r): return on(.delete, r)
        case .lock(let r): return on(.lock, r)
        case .lockAll: return KeychainEvent(kind: .lock, keychain: nil, pid: pid)
        case .unlock(let r, _): return on(.unlock, r)
        case .changePassword(let r, _, _): return on(.passwordChanged, r)
        case .setDefaultKeychain(let r): return on(.defaultChanged, r)
        case .setSearchList, .createKeychain, .deleteKeychain: return KeychainEvent(kind: .keychainListChanged, keychain: nil, pid: pid)
        default: return nil
        }
    }
}
