@testable import Counterpart
import Testing

/// How an S3 store's location, endpoint and environment become a configuration (no engine).
@Suite("S3 configuration parsing")
struct S3ConfigurationTests {
    static let credentials = ["AWS_ACCESS_KEY_ID": "key", "AWS_SECRET_ACCESS_KEY": "secret"]

    @Test(arguments: [
        ("s3://bucket", "bucket", "", "a bucket alone: no prefix"),
        ("s3://bucket/", "bucket", "", "a trailing slash is no prefix"),
        ("s3://bucket/uploads", "bucket", "uploads/", "a prefix is given its slash"),
        ("s3://bucket/uploads/", "bucket", "uploads/", "a prefix with its slash stays"),
        ("s3://my.bucket-1/a/b/c", "my.bucket-1", "a/b/c/", "dots and dashes in the bucket, a deep prefix"),
    ])
    func aLocationGivesBucketAndPrefix(location: String, bucket: String, prefix: String, rule: String) throws {
        let configuration = try S3Configuration(storeURL: location, endpoint: "http://127.0.0.1:17680", environment: Self.credentials)
        #expect(configuration.bucket == bucket, "\(rule)")
        #expect(configuration.prefix == prefix, "\(rule)")
        #expect(configuration.region == "us-east-1")
        #expect(configuration.stallSeconds == 20, "a store's request fails after 20 s without a byte unless --s3-timeout says")
        #expect(configuration.accessKeyID == "key")
        #expect(configuration.secretAccessKey == "secret")
    }

    @Test(arguments: [
        ("bucket", S3ConfigurationError.notAnS3URL("bucket"), "no scheme"),
        ("https://bucket/x", .notAnS3URL("https://bucket/x"), "another scheme"),
        ("s3://", .invalidBucket(""), "no bucket"),
        ("s3:///prefix", .invalidBucket(""), "an empty bucket"),
        ("s3://Bucket", .invalidBucket("Bucket"), "upper case"),
        ("s3://ab", .invalidBucket("ab"), "too short"),
        ("s3://-bucket", .invalidBucket("-bucket"), "starts with a dash"),
        ("s3://bucket_name", .invalidBucket("bucket_name"), "an underscore"),
        ("s3://bucket/a//b", .invalidPrefix("a//b"), "an empty prefix segment"),
    ])
    func aBadLocationIsRefusedWithItsReason(location: String, expected: S3ConfigurationError, rule: String) {
        #expect(throws: expected, "\(rule)") {
            try S3Configuration(storeURL: location, endpoint: "http://127.0.0.1:1", environment: Self.credentials)
        }
    }

    @Test(arguments: [
        ("http://127.0.0.1:17680", "http://127.0.0.1:17680"),
        ("http://127.0.0.1:17680/", "http://127.0.0.1:17680"),
        ("https://s3.example.com", "https://s3.example.com"),
        ("http://[::1]:9000", "http://[::1]:9000"),
    ])
    func anEndpointIsKeptWithoutItsTrailingSlash(endpoint: String, expected: String) throws {
        #expect(try S3Configuration(storeURL: "s3://bucket", endpoint: endpoint, environment: Self.credentials).endpoint == expected)
    }

    @Test(arguments: [
        ("127.0.0.1:17680", "it must start with http:// or https://"),
        ("ftp://host", "it must start with http:// or https://"),
        ("http://", "it has no host"),
        ("http://host/bucket", "it must be only a scheme, a host and a port (buckets go in the path, credentials in the environment)"),
        ("http://user:pw@host", "it must be only a scheme, a host and a port (buckets go in the path, credentials in the environment)"),
    ])
    func aBadEndpointIsRefused(endpoint: String, reason: String) {
        #expect(throws: S3ConfigurationError.invalidEndpoint(endpoint, reason)) {
            try S3Configuration(storeURL: "s3://bucket", endpoint: endpoint, environment: Self.credentials)
        }
    }

    @Test func aMissingEndpointIsNamed() {
        #expect(throws: S3ConfigurationError.missingEndpoint) {
            try S3Configuration(storeURL: "s3://bucket", endpoint: nil, environment: Self.credentials)
        }
        #expect(throws: S3ConfigurationError.missingEndpoint) {
            try S3Configuration(storeURL: "s3://bucket", endpoint: "", environment: Self.credentials)
        }
        #expect(S3ConfigurationError.missingEndpoint.description.contains("--s3-endpoint"))
    }

    @Test func missingCredentialsNameTheVariables() {
        #expect(throws: S3ConfigurationError.missingVariable("AWS_ACCESS_KEY_ID (or COUNTERPART_AWS_ACCESS_KEY_ID)")) {
            try S3Configuration(storeURL: "s3://bucket", endpoint: "http://h", environment: ["AWS_SECRET_ACCESS_KEY": "s"])
        }
        #expect(throws: S3ConfigurationError.missingVariable("AWS_SECRET_ACCESS_KEY (or COUNTERPART_AWS_SECRET_ACCESS_KEY)")) {
            try S3Configuration(storeURL: "s3://bucket", endpoint: "http://h", environment: ["AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": ""])
        }
    }

    @Test(arguments: [
        ([:], "us-east-1", "no region: us-east-1"),
        (["AWS_DEFAULT_REGION": "eu-west-1"], "eu-west-1", "AWS_DEFAULT_REGION"),
        (["AWS_REGION": "eu-west-2", "AWS_DEFAULT_REGION": "eu-west-1"], "eu-west-2", "AWS_REGION before AWS_DEFAULT_REGION"),
        (["COUNTERPART_AWS_DEFAULT_REGION": "ap-south-1", "AWS_REGION": "eu-west-2"], "ap-south-1", "COUNTERPART_ before the plain names"),
        (["COUNTERPART_AWS_REGION": "us-west-2", "COUNTERPART_AWS_DEFAULT_REGION": "ap-south-1"], "us-west-2", "COUNTERPART_AWS_REGION first"),
    ])
    func theRegionComesFromTheEnvironment(variables: [String: String], region: String, rule: String) throws {
        let environment = Self.credentials.merging(variables) { $1 }
        #expect(try S3Configuration(storeURL: "s3://bucket", endpoint: "http://h", environment: environment).region == region, "\(rule)")
    }

    @Test func counterpartVariablesWinOverThePlainOnes() throws {
        let environment = Self.credentials.merging(["COUNTERPART_AWS_ACCESS_KEY_ID": "mine", "COUNTERPART_AWS_SECRET_ACCESS_KEY": "my-secret"]) { $1 }
        let configuration = try S3Configuration(storeURL: "s3://bucket", endpoint: "http://h", environment: environment)
        #expect(configuration.accessKeyID == "mine")
        #expect(configuration.secretAccessKey == "my-secret")
    }

    @Test func aRegionThatWouldBreakCurlsSigningParameterIsRefused() {
        #expect(throws: S3ConfigurationError.invalidRegion("us:east")) {
            try S3Configuration(storeURL: "s3://bucket", endpoint: "http://h", environment: Self.credentials.merging(["AWS_REGION": "us:east"]) { $1 })
        }
    }
}
