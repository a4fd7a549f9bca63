import Crypto
import Foundation
import GRDB
import KeychainCore
import Logging
import Synchronization

/// Sealing and opening an item's row: metadata, item key and secret, their associated data, and the blind indexes.
extension KeychainFile {
    struct SealedItem {
        var uuid: Data
        var kind: String
        var accessibility: String
        var sync: Int64
        var generation: Int64
        var primaryIndex: Data
        var groupIndex: Data
        var accountIndex: Data
        var serviceIndex: Data
        var meta: Data
        var wrappedKey: Data
        var secret: Data

        func identity(rowID: Int64) -> RowIdentity {
            RowIdentity(rowID: rowID, uuid: uuid, kind: kind, accessibility: accessibility, sync: sync,
                        generation: generation, primaryIndex: primaryIndex, groupIndex: groupIndex,
                        accountIndex: accountIndex, serviceIndex: serviceIndex)
        }
    }

    func classKey(_ cls: Accessibility) -> (SymmetricKey, SymmetricKey)? {
        keys.withLock { keys in
            guard let ck = keys.classKeys[cls], let mk = keys.metadataKeys[cls] else { return nil }
            return (ck, mk)
        }
    }

    func lockedError(_ cls: Accessibility) -> KeychainError {
        // The Asker unlocks a keychain with a password on the way (errSecInteractionNotAllowed where nobody asks).
        hasPassword ? .needs(PendingAccess(.keychainPassword)) : .interactionNotAllowed("the keychain is locked")
    }

    /// Opens the application-password layer with the call's password. None, or a wrong one (dropped from the
    /// context), is a requirement the Asker meets by asking (Apple's retry loop).
    func unwrapApplicationLayer(_ inner: Data, item: Item, query: ItemQuery?, grants: AccessGrants, header: FileHeader,
                                uuid: Data, generation: Int64) throws(KeychainError) -> Data {
        let aad = ApplicationPasswordLayer.aad(header: header, uuid: uuid, generation: generation)
        var retry = false
        if let password = applicationPassword(for: item.uuid, query: query, grants: grants) {
            if let key = try? ApplicationPasswordLayer.unwrap(inner, password: password, aad: aad) {
                // The right one: the context keeps it for its later calls (LAContext's credential).
                query?.authenticationContext?.setApplicationPassword(password)
                return key
            }
            if query?.authenticationContext?.applicationPassword == password {
                query?.authenticationContext?.setApplicationPassword(nil)
            }
            retry = true
        }
        let decision = AccessEvaluator.requirementDecision(.applicationPassword, circumstances(query))
        if case .needs = decision { _ = try follow(decision, item: item, retry: retry) }
        throw .interactionNotAllowed(retry ? "wrong application password" : "the item needs its application password")
    }

    /// The attribute whose blind index sits in `service_index` for each class.
    static func serviceCode(_ cls: ItemClass) -> String? {
        switch cls {
        case .genericPassword: "svce"
        case .internetPassword: "srvr"
        case .key: "atag"
        case .certificate: "slnr"
        case .identity: nil
        }
    }

    static func accountCode(_ cls: ItemClass) -> String? {
        switch cls {
        case .genericPassword, .internetPassword: "acct"
        case .key: "klbl"
        case .certificate: "issr"
        case .identity: nil
        }
    }

    func indexBytes(_ value: AttributeValue?, code: String, cls: ItemClass) -> [UInt8] {
        let kind = Schema.attributes(of: cls)[code]?.kind ?? .blob
        return (value ?? kind.defaultValue).matchKey(for: kind)
    }

    func seal(_ item: Item, secret: SecretBytes, generation: Int64, applicationPassword: SecretBytes? = nil)
        throws(KeychainError) -> SealedItem
    {
        let header = self.header.withLock { $0 }
        let cls = item.accessibility
        guard let (classKey, metaKey) = classKey(cls) else { throw lockedError(cls) }
        let uuid = uuidData(item.uuid)
        let kind = item.itemClass.rawValue
        let sync: Int64 = item.isSynchronizable ? 1 : 0
        let primaryIndex = deviceKeys.primaryIndex(item.primaryKeyBytes)
        let accountCode = Self.accountCode(item.itemClass) ?? "acct"
        let serviceCode = Self.serviceCode(item.itemClass) ?? "svce"
        do {
            var metaAAD = AAD("kc1/meta")
            metaAAD.append(header.dbUUID); metaAAD.append(uuid); metaAAD.append(kind); metaAAD.append(cls.rawValue)
            metaAAD.append(sync); metaAAD.append(generation)
            let meta = try Sealing.seal(ItemCodec.encode(item), key: metaKey, aad: metaAAD.bytes)

            let itemKey = SymmetricKey.random()
            let secretAAD = Self.secretAAD(header: header, uuid: uuid, kind: kind, cls: cls, generation: generation,
                                           binding: nil)
            var padded = SecretPadding.pad(secret)
            defer { padded.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
            let sealedSecret = try Sealing.seal(padded, key: itemKey, aad: secretAAD)

            var keyBytes = itemKey.bytes
            defer { keyBytes.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
            if item.accessControl?.needsApplicationPassword == true {
                guard let applicationPassword else { throw KeychainError.interactionNotAllowed() }
                // A second wrap under a key only the application password yields (CRYPTO-DESIGN §5 APP-PW).
                keyBytes = try ApplicationPasswordLayer.wrap(
                    keyBytes, password: applicationPassword, kdf: header.kdf,
                    aad: ApplicationPasswordLayer.aad(header: header, uuid: uuid, generation: generation))
            }
            let wrappedKey = try Sealing.seal(
                keyBytes, key: classKey,
                aad: itemKeyAAD(header: header, uuid: uuid, cls: cls, generation: generation, primaryIndex: primaryIndex))
            return SealedItem(
                uuid: uuid, kind: kind, accessibility: cls.rawValue, sync: sync, generation: generation,
                primaryIndex: primaryIndex,
                groupIndex: deviceKeys.groupIndex(item.accessGroup, kind: kind),
                accountIndex: deviceKeys.accountIndex(
                    indexBytes(item.effectiveValue(accountCode), code: accountCode, cls: item.itemClass), kind: kind),
                serviceIndex: deviceKeys.serviceIndex(
                    indexBytes(item.effectiveValue(serviceCode), code: serviceCode, cls: item.itemClass), kind: kind),
                meta: meta, wrappedKey: wrappedKey, secret: sealedSecret)
        } catch let error as KeychainError {
            throw error
        } catch {
            throw KeychainError(.internalComponent, "sealing failed")
        }
    }

    func itemKeyAAD(header: FileHeader, uuid: Data, cls: Accessibility, generation: Int64, primaryIndex: Data)
        -> [UInt8]
    {
        var aad = AAD("kc1/ik")
        aad.append(header.dbUUID); aad.append(uuid); aad.append(cls.rawValue); aad.append(Int64(1))
        aad.append(generation); aad.append(primaryIndex)
        return aad.bytes
    }

    /// Decrypts a row's metadata; its class key must be available.
    func openMeta(_ row: ItemRow) throws(KeychainError) -> (Item, Accessibility) {
        let header = self.header.withLock { $0 }
        guard let cls = Accessibility(rawValue: row.accessibility), let itemClass = ItemClass(rawValue: row.kind) else {
            throw KeychainError.decode("row")
        }
        guard let (_, metaKey) = classKey(cls) else { throw lockedError(cls) }
        var aad = AAD("kc1/meta")
        aad.append(header.dbUUID); aad.append(row.uuid); aad.append(row.kind); aad.append(cls.rawValue)
        aad.append(row.sync); aad.append(row.generation)
        let plain = try Sealing.open(row.meta, key: metaKey, aad: aad.bytes)
        let item: Item
        do { item = try ItemCodec.decode(plain, itemClass: itemClass, uuid: try uuid(row.uuid)) } catch {
            throw KeychainError.decode("metadata")
        }
        // The clear columns must agree with what the sealed metadata says.
        guard item.accessibility == cls, (item.isSynchronizable ? 1 : 0) == row.sync else {
            throw KeychainError.decode("row does not match its metadata")
        }
        return (item, cls)
    }

    /// Decrypts a row's secret: unwrap the item key with the class key, then open the secret.
    func openSecret(_ row: ItemRow, item: Item, query: ItemQuery?, grants: AccessGrants) throws(KeychainError)
        -> SecretBytes
    {
        let header = self.header.withLock { $0 }
        let cls = item.accessibility
        guard let (classKey, _) = classKey(cls) else { throw lockedError(cls) }
        let uuidBytes = row.uuid
        let generation = row.generation
        var rawKey = try Sealing.open(
            row.wrappedKey, key: classKey,
            aad: itemKeyAAD(header: header, uuid: uuidBytes, cls: cls, generation: generation,
                            primaryIndex: row.primaryIndex))
        defer { rawKey.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
        var keyData = Data()
        defer { keyData.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
        if item.accessControl?.needsApplicationPassword == true {
            keyData = try unwrapApplicationLayer(rawKey, item: item, query: query, grants: grants, header: header,
                                                 uuid: uuidBytes, generation: generation)
        }
        // The item key lives on only inside SymmetricKey, which wipes itself; the decrypted copies above are wiped.
        let itemKey = SymmetricKey(data: keyData.isEmpty ? rawKey : keyData)
        let aad = Self.secretAAD(header: header, uuid: uuidBytes, kind: item.itemClass.rawValue, cls: cls,
                                 generation: generation, binding: row.secretBinding)
        var padded = try Sealing.open(row.secret, key: itemKey, aad: aad)
        return try SecretPadding.unpad(&padded)
    }

    /// What a secret is sealed against: the item's identity, class and generation. Rows written by format 1 were
    /// also bound to their metadata ciphertext's hash, kept in `secret_binding` since (so the metadata can be sealed
    /// again without the secret).
    static func secretAAD(header: FileHeader, uuid: Data, kind: String, cls: Accessibility, generation: Int64,
                          binding: Data?) -> [UInt8] {
        var aad = AAD(binding == nil ? "kc2/sec" : "kc1/sec")
        aad.append(header.dbUUID); aad.append(uuid); aad.append(kind)
        aad.append(cls.rawValue); aad.append(generation)
        if let binding { aad.append(binding) }
        return aad.bytes
    }

    /// Moves a row from an old class key to a new one (a password change): the item-key blob is wrapped again and
    /// the metadata sealed again under the new metadata key. The secret is untouched: it is sealed under its own
    /// item key (behind an application password too, for such items), which the new wrap carries.
    func rewrap(_ row: ItemRow, from oldKey: SymmetricKey, to newKey: SymmetricKey, header: FileHeader, db: Database)
        throws
    {
        guard let cls = Accessibility(rawValue: row.accessibility) else { throw KeychainError.decode("row") }
        let keyAAD = itemKeyAAD(header: header, uuid: row.uuid, cls: cls, generation: row.generation,
                                primaryIndex: row.primaryIndex)
        var keyBlob = try Sealing.open(row.wrappedKey, key: oldKey, aad: keyAAD)
        defer { keyBlob.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
        let wrappedKey = try Sealing.seal(keyBlob, key: newKey, aad: keyAAD)
        var metaAAD = AAD("kc1/meta")
        metaAAD.append(header.dbUUID); metaAAD.append(row.uuid); metaAAD.append(row.kind); metaAAD.append(cls.rawValue)
        metaAAD.append(row.sync); metaAAD.append(row.generation)
        var plain = try Sealing.open(row.meta, key: KeyHierarchy.metadataKey(classKey: oldKey, header: header),
                                     aad: metaAAD.bytes)
        defer { plain.withUnsafeMutableBytes { if let b = $0.baseAddress { wipe(b, $0.count) } } }
        let meta = try Sealing.seal(plain, key: KeyHierarchy.metadataKey(classKey: newKey, header: header),
                                    aad: metaAAD.bytes)
        // A format-1 row keeps its binding; a format-2 row has none (its secret is not bound to the metadata).
        try db.cachedStatement(sql: "UPDATE items SET wrapped_key = ?, meta = ? WHERE rowid = ?")
            .execute(arguments: [wrappedKey, meta, row.rowID])
    }
}
