/// The header fields of one part, in the order they were sent. Names are compared
/// case-insensitively; unknown headers are kept; a repeated header keeps every occurrence.
public struct MultipartHeaders: Equatable, Sendable, Sequence {
    public struct Field: Equatable, Sendable {
        public var name: String
        public var value: String
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    public private(set) var fields: [Field]

    public init(_ fields: [Field] = []) { self.fields = fields }

    public init(_ pairs: [(String, String)]) {
        fields = pairs.map { Field(name: $0.0, value: $0.1) }
    }

    /// The first value of the header `name`, if any.
    public subscript(name: String) -> String? {
        fields.first { ASCII.equalsIgnoringCase($0.name, name) }?.value
    }

    /// Every value of the header `name`, in order.
    public func values(of name: String) -> [String] {
        fields.filter { ASCII.equalsIgnoringCase($0.name, name) }.map(\.value)
    }

    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

    mutating func append(_ field: Field) { fields.append(field) }

    mutating func continueLastValue(with text: String) {
        fields[fields.count - 1].value += " " + text
    }
}
