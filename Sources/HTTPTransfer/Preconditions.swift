/// What a server knows of the representation it would send: the validators that
/// conditional requests are compared with.
public struct Validators: Equatable, Sendable {
    public var entityTag: EntityTag?
    public var lastModified: HTTPDate?

    public init(entityTag: EntityTag? = nil, lastModified: HTTPDate? = nil) {
        self.entityTag = entityTag
        self.lastModified = lastModified
    }
}

/// The conditional header fields of a request, as received (nil: absent).
public struct ConditionalRequest: Equatable, Sendable {
    public var method: String
    public var ifMatch: String?
    public var ifNoneMatch: String?
    public var ifModifiedSince: String?
    public var ifUnmodifiedSince: String?
    public var ifRange: String?
    /// Whether the request has a `Range` header (`If-Range` is ignored without one).
    public var hasRange: Bool

    public init(
        method: String, ifMatch: String? = nil, ifNoneMatch: String? = nil,
        ifModifiedSince: String? = nil, ifUnmodifiedSince: String? = nil,
        ifRange: String? = nil, hasRange: Bool = false
    ) {
        self.method = method
        self.ifMatch = ifMatch
        self.ifNoneMatch = ifNoneMatch
        self.ifModifiedSince = ifModifiedSince
        self.ifUnmodifiedSince = ifUnmodifiedSince
        self.ifRange = ifRange
        self.hasRange = hasRange
    }

    /// The outcome of the preconditions.
    public enum Decision: Equatable, Sendable {
        /// Serve the request; honour its `Range`, if any.
        case proceed
        /// Serve the whole representation: `If-Range` did not match, so `Range` is ignored.
        case ignoreRange
        /// `304 Not Modified`.
        case notModified
        /// `412 Precondition Failed`.
        case preconditionFailed
    }

    /// Evaluates the preconditions in the order of RFC 9110 §13.2.2 against the selected
    /// representation's validators.
    ///
    /// Dates that do not parse are ignored, as are `If-Unmodified-Since` and
    /// `If-Modified-Since` when the representation has no modification date. `If-Range`
    /// with an entity tag needs a strong match; with a date, the exact `Last-Modified`.
    public func evaluate(_ validators: Validators, now: HTTPDate = .now) -> Decision {
        let isGetOrHead = method == "GET" || method == "HEAD"

        // 1–2: If-Match, else If-Unmodified-Since.
        if let ifMatch {
            if !EntityTagCondition(parsing: ifMatch).matches(validators.entityTag, weakComparison: false) {
                return .preconditionFailed
            }
        } else if let ifUnmodifiedSince, let lastModified = validators.lastModified,
                  let date = HTTPDate(parsing: ifUnmodifiedSince, now: now), lastModified > date {
            return .preconditionFailed
        }

        // 3–4: If-None-Match, else If-Modified-Since (GET and HEAD only).
        if let ifNoneMatch {
            if EntityTagCondition(parsing: ifNoneMatch).matches(validators.entityTag, weakComparison: true) {
                return isGetOrHead ? .notModified : .preconditionFailed
            }
        } else if isGetOrHead, let ifModifiedSince, let lastModified = validators.lastModified,
                  let date = HTTPDate(parsing: ifModifiedSince, now: now), lastModified <= date {
            return .notModified
        }

        // 5: If-Range, only for a GET with a Range.
        if method == "GET", hasRange, let ifRange, !ifRangeMatches(ifRange, validators, now: now) {
            return .ignoreRange
        }
        return .proceed
    }

    private func ifRangeMatches(_ value: String, _ validators: Validators, now: HTTPDate) -> Bool {
        if let tag = EntityTag(parsing: value) {
            guard let current = validators.entityTag else { return false }
            return tag.strongMatches(current)
        }
        guard let date = HTTPDate(parsing: value, now: now), let lastModified = validators.lastModified else {
            return false
        }
        return date == lastModified
    }
}
