@testable import Counterpart
import Testing

/// The client's own encodings and its XML reader (no engine).
@Suite("S3 encodings and XML")
struct S3EncodingTests {
    @Test(arguments: [
        ("plain.txt", "plain.txt"),
        ("a/b/c", "a/b/c"),
        ("with space", "with%20space"),
        ("plus+percent%", "plus%2Bpercent%25"),
        ("ünï", "%C3%BCn%C3%AF"),
        ("tilde~dash-under_dot.", "tilde~dash-under_dot."),
        ("q?h#a&e=", "q%3Fh%23a%26e%3D"),
    ])
    func keysArePercentEncodedButForSlashes(key: String, path: String) {
        #expect(S3Client.encodedPath(key) == path)
    }

    @Test(arguments: [
        ("plain", "plain"),
        ("two  spaces", "two%20%20spaces"),
        ("100%", "100%25"),
        ("résumé", "r%C3%A9sum%C3%A9"),
        ("tab\there", "tab%09here"),
    ])
    func metadataValuesAreSentAsASCIIAndReadBack(value: String, sent: String) {
        #expect(S3Metadata.encoded(value) == sent)
        #expect(S3Metadata.decoded(sent) == value)
    }

    @Test func aMetadataValueSetByAnotherClientIsReadAsIs() {
        #expect(S3Metadata.decoded("50%off") == "50%off")
    }

    @Test func aListingIsReadWithEntitiesNamespacesAndCDATA() throws {
        let xml = """
        <?xml version="1.0" encoding="UTF-8"?>
        <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
          <Name>bucket</Name><IsTruncated>true</IsTruncated>
          <Contents><Key>a &amp; b &lt;c&gt; &#x2F;&#47; &quot;q&quot; &apos;s&apos; &unknown;</Key>
            <ETag>&quot;abc&quot;</ETag><Size>12</Size></Contents>
          <Contents><Key><![CDATA[raw <text> & more]]></Key><Size>0</Size></Contents>
          <s3:CommonPrefixes><s3:Prefix>p/</s3:Prefix></s3:CommonPrefixes>
          <Empty/><Spaces>  </Spaces>
        </ListBucketResult>
        """
        let document = try #require(S3XMLElement.parse(Array(xml.utf8)))
        #expect(document.name == "ListBucketResult")
        #expect(document["IsTruncated"] == "true")
        #expect(document.children("Contents").map { $0["Key"] } == ["a & b <c> // \"q\" 's' &unknown;", "raw <text> & more"])
        #expect(document.child("Contents")?["ETag"] == "\"abc\"")
        #expect(document.child("CommonPrefixes")?["Prefix"] == "p/")
        #expect(document["Empty"] == "")
        #expect(document["Spaces"] == "  ", "a key of spaces is a key")
    }

    @Test(arguments: ["", "<a><b></a>", "<a>", "not xml", "<a></b>"])
    func aBrokenDocumentIsNil(text: String) {
        #expect(S3XMLElement.parse(Array(text.utf8)) == nil)
    }

    @Test func textSentInXMLIsEscaped() {
        #expect(S3XMLText.escaped("a&b<c>\"d'") == "a&amp;b&lt;c&gt;&quot;d&apos;")
    }
}
