#!/usr/bin/env bash
# Remakes tests/fuzz/corpus/s3: S3 answers as moto's server and AWS send them (a ListObjectsV2
# page, an error with a Region, an InitiateMultipartUploadResult, a CompleteMultipartUpload
# error in a 200 answer), AWS CLI files (credentials and config with an "s3 =" block) and
# s3:// URLs.
# Usage: tests/fuzz/seed_s3.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/tests/fuzz/corpus/s3
rm -rf "$out" && mkdir -p "$out" && cd "$out"
printf '<?xml version="1.0" encoding="utf-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>true</IsTruncated><Contents><Key>list-k000</Key><LastModified>2026-11-27T11:29:24.000Z</LastModified><ETag>&quot;b1946ac92492d2347c6235b4d2611184&quot;</ETag><Size>6</Size><StorageClass>STANDARD</StorageClass></Contents><Contents><Key>a &amp; b</Key><ETag>"x-3"</ETag><Size>15728640</Size></Contents><Name>gk-test</Name><Prefix>list-</Prefix><MaxKeys>2</MaxKeys><KeyCount>2</KeyCount><NextContinuationToken>0cc175b9c0f1b6a831c399e269772661</NextContinuationToken></ListBucketResult>' > list.xml
printf '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AuthorizationHeaderMalformed</Code><Message>the region &apos;us-east-1&apos; is wrong; expecting &apos;eu-west-1&apos;</Message><Region>eu-west-1</Region><RequestId>X</RequestId></Error>' > region.xml
printf '<?xml version="1.0" encoding="utf-8"?>\n<InitiateMultipartUploadResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>gk-test</Bucket><Key>m</Key><UploadId>gtKZFjtP7TUZOb8RaQ8ChPpjNEkTXvQRkmoqfIgr7mUn4n38XPSklTWKw</UploadId></InitiateMultipartUploadResult>' > upload.xml
printf '<?xml version="1.0" encoding="UTF-8"?>\n\n<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>' > complete_error.xml
printf '# comment\n[default]\naws_access_key_id = AKDEFAULT\naws_secret_access_key=secret=with=equals \n[work]\naws_access_key_id = AKWORK\r\n' > credentials.ini
printf '[default]\nregion = eu-west-3\n  [ profile work ]  \nregion = us-west-2\nendpoint_url = https://ns.compat.objectstorage.us-ashburn-1.oraclecloud.com\ns3 =\n    addressing_style = path\n; end\n' > config.ini
printf 's3://corpus/fw/train_*.bin' > url.txt
printf 's3://My_Bucket.1/' > bucket.txt
ls -l "$out" | awk 'NR > 1 { print $5, $9 }'
