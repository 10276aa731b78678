#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A point in time with one-second resolution, as HTTP carries it (RFC 9110 §5.6.7).
public struct HTTPDate: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var secondsSince1970: Int64

    public init(secondsSince1970: Int64) { self.secondsSince1970 = secondsSince1970 }

    /// The current time, from the system clock.
    public static var now: HTTPDate { HTTPDate(secondsSince1970: Int64(time(nil))) }

    public static func < (a: HTTPDate, b: HTTPDate) -> Bool { a.secondsSince1970 < b.secondsSince1970 }

    /// The IMF-fixdate form: `Sun, 06 Nov 1994 08:49:37 GMT`; every file response carries one.
    public var description: String {
        if let text = ASCIIWriter.optionalString(capacity: Self.imfFixdateLength, { write(to: &$0) }) { return text }
        // Outside the four-digit years (never a file's date): the slow general form.
        let (_, secondsOfDay, year, month, day, weekday) = fields
        var yearText = String(year)
        while yearText.count < 4 { yearText = "0" + yearText }
        return "\(Self.weekdays[weekday]), \(Self.twoDigits(day)) \(Self.months[month - 1]) \(yearText) "
            + "\(Self.twoDigits(secondsOfDay / 3600)):\(Self.twoDigits(secondsOfDay / 60 % 60)):\(Self.twoDigits(secondsOfDay % 60)) GMT"
    }

    /// The bytes of an IMF-fixdate.
    package static let imfFixdateLength = 29

    /// The IMF-fixdate written into `buffer` (`imfFixdateLength` bytes at least): the bytes
    /// written, nil outside the four-digit years (`description` has those). A JSON writer
    /// puts it in its text without making a string.
    package func write(into buffer: UnsafeMutableBufferPointer<UInt8>) -> Int? {
        var out = ASCIIWriter(buffer)
        return write(to: &out) ? out.count : nil
    }

    private func write(to out: inout ASCIIWriter) -> Bool {
        let (_, secondsOfDay, year, month, day, weekday) = fields
        guard (0...9999).contains(year) else { return false }
        out.text("SunMonTueWedThuFriSat", index: weekday, width: 3)
        out.text(", ")
        out.number(UInt64(day), minimumDigits: 2)
        out.byte(0x20)
        out.text("JanFebMarAprMayJunJulAugSepOctNovDec", index: month - 1, width: 3)
        out.byte(0x20)
        out.number(UInt64(year), minimumDigits: 4)
        out.byte(0x20)
        out.number(UInt64(secondsOfDay / 3600), minimumDigits: 2)
        out.byte(0x3A)
        out.number(UInt64(secondsOfDay / 60 % 60), minimumDigits: 2)
        out.byte(0x3A)
        out.number(UInt64(secondsOfDay % 60), minimumDigits: 2)
        out.text(" GMT")
        return true
    }

    private var fields: (days: Int64, secondsOfDay: Int, year: Int, month: Int, day: Int, weekday: Int) {
        let days = secondsSince1970 >= 0 ? secondsSince1970 / 86_400 : (secondsSince1970 - 86_399) / 86_400
        let (year, month, day) = Self.civil(fromDays: days)
        return (days, Int(secondsSince1970 - days * 86_400), year, month, day, Int(((days % 7) + 7 + 4) % 7))  // 1970-01-01 was a Thursday
    }

    private static func twoDigits(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }

    /// Parses the three forms RFC 9110 requires recipients to accept:
    /// `Sun, 06 Nov 1994 08:49:37 GMT` (IMF-fixdate), `Sunday, 06-Nov-94 08:49:37 GMT`
    /// (RFC 850) and `Sun Nov  6 08:49:37 1994` (asctime). The day name is not checked
    /// against the date. A two-digit year more than 50 years after `now` is taken from the
    /// century before (RFC 9110 §5.6.7).
    public init?(parsing text: String, now: HTTPDate = .now) {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        let day: Int, month: Int, year: Int, clock: String
        if words.count == 6, words[0].hasSuffix(","), words[5] == "GMT" {
            // IMF-fixdate
            guard Self.weekdays.contains(String(words[0].dropLast())),
                  words[1].count == 2, let d = Self.digits(words[1]),
                  let m = Self.months.firstIndex(of: words[2]),
                  words[3].count == 4, let y = Self.digits(words[3]) else { return nil }
            (day, month, year, clock) = (d, m + 1, y, words[4])
        } else if words.count == 4, words[0].hasSuffix(","), words[3] == "GMT" {
            // RFC 850: weekday, DD-Mon-YY
            let date = words[1].split(separator: "-", omittingEmptySubsequences: false).map(String.init)
            guard Self.longWeekdays.contains(String(words[0].dropLast())), date.count == 3,
                  date[0].count == 2, let d = Self.digits(date[0]),
                  let m = Self.months.firstIndex(of: date[1]),
                  date[2].count == 2, let yy = Self.digits(date[2]) else { return nil }
            let currentYear = Self.civil(fromDays: now.secondsSince1970 / 86_400).year
            var y = currentYear - currentYear % 100 + yy
            if y > currentYear + 50 { y -= 100 }
            (day, month, year, clock) = (d, m + 1, y, words[2])
        } else if words.count == 5, Self.weekdays.contains(words[0]) {
            // asctime: Sun Nov  6 08:49:37 1994
            guard let m = Self.months.firstIndex(of: words[1]),
                  (1...2).contains(words[2].count), let d = Self.digits(words[2]),
                  words[4].count == 4, let y = Self.digits(words[4]) else { return nil }
            (day, month, year, clock) = (d, m + 1, y, words[3])
        } else {
            return nil
        }
        let time = clock.split(separator: ":", omittingEmptySubsequences: false)
        guard time.count == 3, time.allSatisfy({ $0.count == 2 }),
              let hour = Self.digits(time[0]), let minute = Self.digits(time[1]), let second = Self.digits(time[2]),
              hour < 24, minute < 60, second <= 60,
              day >= 1, day <= Self.daysIn(month: month, year: year) else { return nil }
        let days = Self.days(fromCivil: year, month, day)
        // A leap second (:60) is read as the last second of its minute.
        secondsSince1970 = days * 86_400 + Int64(hour * 3600 + minute * 60 + min(second, 59))
    }

    /// The value of `text` when it is only ASCII digits (no sign, no spaces).
    private static func digits<S: StringProtocol>(_ text: S) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy(ASCII.isDigit) else { return nil }
        return Int(text)
    }

    private static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let longWeekdays = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    // Howard Hinnant's days-from-civil algorithms (proleptic Gregorian calendar).
    private static func days(fromCivil year: Int, _ month: Int, _ day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }
}
