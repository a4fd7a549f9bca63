import Foundation
import GRDB
import KeychainCore
import Logging

/// Trusted-application lists (macOS's item ACL): which programs read an item's secret without the user's yes.
extension KeychainFile {
    /// The outcome of checking the calling program against an item's list.
    enum ApplicationApproval: Equatable {
        /// Trusted, or nothing to check (no list, or the caller's program is not known).
        case trusted
        /// The user allowed this one read.
        case allowedOnce
        /// The user chose Always Allow: the program is to be added to the item's list.
        case allowedAlways(TrustedApplication)
        /// UI Skip: the item is left out.
        case leaveOut
    }

    /// The list a new item gets: what the add asked for (`kSecAttrAccess`, `-T`, `-A`), else its creator alone.
    func applicationAccess(for query: ItemQuery, caller: Caller) throws(KeychainError) -> ApplicationAccess? {
        switch query.applicationAccess {
        case .anyApplication: return .anyApplication
        case .applications(let paths):
            var list: [TrustedApplication] = []
            for path in paths {
                guard let application = ExecutableDigest.application(at: path) else {
                    throw .param("the trusted application \(path) cannot be read")
                }
                if !list.contains(application) { list.append(application) }
            }
            return .trusted(list)
        case nil:
            return caller.application.map { .trusted([$0]) }
        }
    }

    /// Whether the caller's program needs the user's yes to read `item`'s secret.
    func needsApproval(_ item: Item, caller: Caller) -> Bool {
        guard let application = caller.application, let access = item.applicationAccess else { return false }
        return !access.trusts(application)
    }

    /// Checks the calling program against `item`'s list before its secret is read, asking the user when the call
    /// allows it: Deny is errSecAuthFailed, no way to ask (or UI Fail) errSecInteractionNotAllowed.
    func approveApplication(_ item: Item, _ query: ItemQuery?, caller: Caller) throws(KeychainError)
        -> ApplicationApproval
    {
        guard needsApproval(item, caller: caller), let application = caller.application else { return .trusted }
        guard let query else {
            throw KeychainError.interactionNotAllowed("\(application.path) is not trusted by the item")
        }
        guard let prompter = try interaction(query) else { return .leaveOut }
        let label = item.attributes["labl"]?.stringValue ?? item.attributes["svce"]?.stringValue
            ?? item.attributes["srvr"]?.stringValue ?? ""
        let changed = item.applicationAccess?.trustedEarlierBuild(of: application) == true
        var description = "\(application.path) wants to use the secret of \u{201C}\(label)\u{201D} in your keychain."
        if changed { description += " The program has changed since it was last allowed." }
        switch prompter.requestConfirmation(ConfirmationRequest(description: description)) {
        case .allow: return .allowedOnce
        case .alwaysAllow: return .allowedAlways(application)
        case .deny: throw KeychainError(.authFailed, "the user denied \(application.path) access to the item")
        case .cancelled: throw KeychainError(.userCanceled)
        case .unavailable: throw KeychainError.interactionNotAllowed("no way to ask whether \(application.path) may read")
        }
    }

    /// Adds `application` to the item's list (Always Allow), once its secret has been read: the item is sealed
    /// again as it is, with the longer list, if nobody changed it meanwhile. Best effort: a failure only means
    /// the user is asked again next time.
    func rememberTrust(_ application: TrustedApplication, row: ItemRow, item: Item, secret: SecretBytes,
                       query: ItemQuery) {
        var trusted = item
        trusted.applicationAccess = (item.applicationAccess ?? .trusted([])).trusting(application)
        do throws(KeychainError) {
            let sealed = try seal(trusted, secret: secret, generation: row.generation + 1,
                                  applicationPassword: applicationPasswordForWriting(trusted, query))
            let stored = try write { db, changes -> Bool in
                guard try unchanged([row], db: db) else { return false }
                changes.removed.append(contribution(of: row))
                try replace(rowID: row.rowID, with: sealed, db: db, changes: &changes)
                return true
            }
            configuration.logger.info("item.application.trusted", metadata: ["stored": "\(stored)"])
        } catch {
            configuration.logger.warning("item.application.trust-not-stored", metadata: ["status": "\(error.status.rawValue)"])
        }
    }
}
