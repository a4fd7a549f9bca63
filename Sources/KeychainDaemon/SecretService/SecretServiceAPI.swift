import KeychainDBus

/// The Secret Service's objects as data (the freedesktop Secret Service API, 0.2): for each kind of object its
/// interfaces, each interface's methods with their argument signatures, its properties and signals. Every call is
/// checked against this table once, before a handler runs: a member the object does not have is UnknownMethod, an
/// interface it does not have is UnknownMethod too (as GDBus, and so gnome-keyring, answers), arguments of another
/// signature are InvalidArgs. Handlers then read their arguments knowing their types. Introspect shows the same table.
enum SecretServiceAPI {
    struct Argument: Sendable {
        let name: String
        let type: String
    }

    struct Method: Sendable {
        let name: String
        let inputs: [Argument]
        let outputs: [Argument]
        /// The body signature a call must carry.
        var signature: String { inputs.map(\.type).joined() }
    }

    struct Property: Sendable {
        let name: String
        let type: String
        let writable: Bool
    }

    struct Signal: Sendable {
        let name: String
        let arguments: [Argument]
    }

    struct Interface: Sendable {
        let name: String
        var methods: [Method] = []
        var properties: [Property] = []
        var signals: [Signal] = []
    }

    enum ObjectKind: Sendable, Equatable {
        case service, collection, item, session, prompt
    }

    // MARK: - The table

    private static func m(_ name: String, _ inputs: [(String, String)] = [], _ outputs: [(String, String)] = []) -> Method {
        Method(name: name, inputs: inputs.map { Argument(name: $0.0, type: $0.1) },
               outputs: outputs.map { Argument(name: $0.0, type: $0.1) })
    }

    private static func s(_ name: String, _ arguments: [(String, String)]) -> Signal {
        Signal(name: name, arguments: arguments.map { Argument(name: $0.0, type: $0.1) })
    }

    static let secretStructure = "(oayays)"

    static let service = Interface(
        name: SecretServiceServer.serviceInterface,
        methods: [
            m("OpenSession", [("algorithm", "s"), ("input", "v")], [("output", "v"), ("result", "o")]),
            m("CreateCollection", [("properties", "a{sv}"), ("alias", "s")], [("collection", "o"), ("prompt", "o")]),
            m("SearchItems", [("attributes", "a{ss}")], [("unlocked", "ao"), ("locked", "ao")]),
            m("Unlock", [("objects", "ao")], [("unlocked", "ao"), ("prompt", "o")]),
            m("Lock", [("objects", "ao")], [("locked", "ao"), ("Prompt", "o")]),
            m("GetSecrets", [("items", "ao"), ("session", "o")], [("secrets", "a{o\(secretStructure)}")]),
            m("ReadAlias", [("name", "s")], [("collection", "o")]),
            m("SetAlias", [("name", "s"), ("collection", "o")]),
        ],
        properties: [Property(name: "Collections", type: "ao", writable: false)],
        signals: [s("CollectionCreated", [("collection", "o")]), s("CollectionDeleted", [("collection", "o")]),
                  s("CollectionChanged", [("collection", "o")])])

    static let collection = Interface(
        name: SecretServiceServer.collectionInterface,
        methods: [
            m("Delete", [], [("prompt", "o")]),
            m("SearchItems", [("attributes", "a{ss}")], [("results", "ao")]),
            m("CreateItem", [("properties", "a{sv}"), ("secret", secretStructure), ("replace", "b")],
              [("item", "o"), ("prompt", "o")]),
        ],
        properties: [
            Property(name: "Items", type: "ao", writable: false), Property(name: "Label", type: "s", writable: true),
            Property(name: "Locked", type: "b", writable: false), Property(name: "Created", type: "t", writable: false),
            Property(name: "Modified", type: "t", writable: false),
        ],
        signals: [s("ItemCreated", [("item", "o")]), s("ItemDeleted", [("item", "o")]), s("ItemChanged", [("item", "o")])])

    static let item = Interface(
        name: SecretServiceServer.itemInterface,
        methods: [
            m("Delete", [], [("Prompt", "o")]),
            m("GetSecret", [("session", "o")], [("secret", secretStructure)]),
            m("SetSecret", [("secret", secretStructure)]),
        ],
        properties: [
            Property(name: "Locked", type: "b", writable: false), Property(name: "Attributes", type: "a{ss}", writable: true),
            Property(name: "Label", type: "s", writable: true), Property(name: "Created", type: "t", writable: false),
            Property(name: "Modified", type: "t", writable: false),
            // Not in the specification; gnome-keyring has it and libsecret reads it: the item's xdg:schema.
            Property(name: "Type", type: "s", writable: false),
        ])

    static let session = Interface(name: SecretServiceServer.sessionInterface, methods: [m("Close")])

    static let prompt = Interface(
        name: SecretServiceServer.promptInterface,
        methods: [m("Prompt", [("window-id", "s")]), m("Dismiss")],
        signals: [s("Completed", [("dismissed", "b"), ("result", "v")])])

    static let properties = Interface(
        name: SecretServiceServer.propertiesInterface,
        methods: [
            m("Get", [("interface_name", "s"), ("property_name", "s")], [("value", "v")]),
            m("GetAll", [("interface_name", "s")], [("properties", "a{sv}")]),
            m("Set", [("interface_name", "s"), ("property_name", "s"), ("value", "v")]),
        ],
        signals: [s("PropertiesChanged", [("interface_name", "s"), ("changed_properties", "a{sv}"),
                                          ("invalidated_properties", "as")])])

    static let introspectable = Interface(
        name: "org.freedesktop.DBus.Introspectable", methods: [m("Introspect", [], [("xml_data", "s")])])

    static let peer = Interface(
        name: "org.freedesktop.DBus.Peer", methods: [m("Ping"), m("GetMachineId", [], [("machine_uuid", "s")])])

    /// The interfaces an object of `kind` has, its own first.
    static func interfaces(of kind: ObjectKind) -> [Interface] {
        let own: Interface = switch kind {
        case .service: service
        case .collection: collection
        case .item: item
        case .session: session
        case .prompt: prompt
        }
        return [own, properties, introspectable, peer]
    }

    /// What lives at `path`; nil where no Secret Service object can (the caller gets UnknownObject from the
    /// handlers, which also know which collections, items and sessions exist).
    static func kind(of path: String) -> ObjectKind? {
        if path == SecretServiceServer.servicePath { return .service }
        if path.hasPrefix(SecretServiceServer.sessionPrefix) { return .session }
        if path.hasPrefix(SecretServiceServer.promptPrefix) { return .prompt }
        for prefix in [SecretServiceServer.collectionPrefix, SecretServiceServer.aliasPrefix] where path.hasPrefix(prefix) {
            let rest = path.dropFirst(prefix.count)
            guard !rest.isEmpty else { return nil }
            return rest.contains("/") ? .item : .collection
        }
        return nil
    }

    // MARK: - Checking a call

    /// The interface and method a call of `member` (on `interface`, or on the first of the object's that has it when
    /// the call names none) reaches on an object of `kind`, once its arguments have the method's signature;
    /// otherwise the error the caller gets.
    static func method(_ member: String, interface: String?, signature: String, on kind: ObjectKind) throws
        -> (interface: String, method: Method)
    {
        func unknown(_ text: String) -> SecretServiceServer.Failure {
            SecretServiceServer.Failure(name: "org.freedesktop.DBus.Error.UnknownMethod", message: text)
        }
        let all = interfaces(of: kind)
        let owner: Interface
        if let interface {
            guard let named = all.first(where: { $0.name == interface }) else {
                throw unknown("no interface \(interface) at this object")
            }
            owner = named
        } else {
            guard let first = all.first(where: { $0.methods.contains { $0.name == member } }) else {
                throw unknown("no method \(member) here")
            }
            owner = first
        }
        guard let method = owner.methods.first(where: { $0.name == member }) else {
            throw unknown("no method \(member) in interface \(owner.name)")
        }
        guard signature == method.signature else {
            throw SecretServiceServer.Failure.invalidArgs("\(owner.name).\(member) takes (\(method.signature)), not (\(signature))")
        }
        return (owner.name, method)
    }

    // MARK: - Introspection

    /// The introspection document of an object of `kind` (nil: an object with only the standard interfaces),
    /// with `extra` (the portal's interface) and `children` as child nodes.
    static func introspection(of kind: ObjectKind?, extra: String = "", children: [String] = []) -> String {
        let shown = kind.map { interfaces(of: $0) } ?? [properties, introspectable, peer]
        var xml = "<!DOCTYPE node PUBLIC \"-//freedesktop//DTD D-BUS Object Introspection 1.0//EN\" "
            + "\"http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd\">\n<node>\n"
        func arguments(_ list: [Argument], direction: String?) -> String {
            list.map { "      <arg name=\"\($0.name)\" type=\"\($0.type)\"" + (direction.map { " direction=\"\($0)\"" } ?? "") + "/>\n" }
                .joined()
        }
        for interface in shown {
            xml += "  <interface name=\"\(interface.name)\">\n"
            for method in interface.methods {
                xml += "    <method name=\"\(method.name)\">\n" + arguments(method.inputs, direction: "in")
                    + arguments(method.outputs, direction: "out") + "    </method>\n"
            }
            for property in interface.properties {
                let access = property.writable ? "readwrite" : "read"
                xml += "    <property name=\"\(property.name)\" type=\"\(property.type)\" access=\"\(access)\"/>\n"
            }
            for signal in interface.signals {
                xml += "    <signal name=\"\(signal.name)\">\n" + arguments(signal.arguments, direction: nil) + "    </signal>\n"
            }
            xml += "  </interface>\n"
        }
        xml += extra
        for child in children { xml += "  <node name=\"\(child)\"/>\n" }
        return xml + "</node>\n"
    }
}
