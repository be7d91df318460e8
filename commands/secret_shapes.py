"""The token shapes redaction takes from detect-secrets' regex plugins, as its installed version gives them.

Written out here so a verify does not import detect-secrets: its plugins' base module imports `requests` (for
verifiers redaction never calls) and the whole catalogue costs ~0.2 CPU-s of imports a cold process. tests/
test_secret_shapes.py compares this table with the plugins detect-secrets itself finds (class, pattern, flags, in
its order), so an upgrade that adds, drops or changes a plugin fails there until the table is regenerated.
"""

from __future__ import annotations

import re

# Public addresses are evidence here (where a host is), not secrets. The other four backtrack
# catastrophically on one long line a host can write: Cloudant, IBM Cloud IAM and SoftLayer put
# `(?: *)` next to a ` +` separator (cubic in blanks: `password` + 2,000 spaces took 36 s), npm's
# `//.+/:_authToken` is quadratic (30 s for a 240 KB line). Their shapes stay masked by redact.py's
# own rules: `key = value` / `key: value` under any secret name, `_authToken=`, npm_ tokens.
NOT_SECRETS = frozenset({"IPPublicDetector", "CloudantDetector", "IbmCloudIamDetector", "SoftlayerDetector",
                         "NpmDetector"})

# (detect-secrets plugin class, pattern, flags): every RegexBasedDetector's ``denylist`` but NOT_SECRETS'.
DETECTOR_PATTERNS: tuple[tuple[str, str, int], ...] = (
    ('ArtifactoryDetector', '(?:\\s|=|:|"|^)AKC[a-zA-Z0-9]{10,}(?:\\s|"|$)', 0),
    ('ArtifactoryDetector', '(?:\\s|=|:|"|^)AP[\\dABCDEF][a-zA-Z0-9]{8,}(?:\\s|"|$)', 0),
    ('AWSKeyDetector', '(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}', 0),
    ('AWSKeyDetector', 'aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?[\\\'\\"]([0-9a-zA-Z/+]{40})[\\\'\\"]', re.IGNORECASE),  # noqa: E501
    ('AzureStorageKeyDetector', 'AccountKey=[a-zA-Z0-9+\\/=]{88}', 0),
    ('BasicAuthDetector', "://[^:/\\?\\#\\[\\]@!\\$\\&'\\(\\)\\*\\+,;=\\s]+:([^:/\\?\\#\\[\\]@!\\$\\&'\\(\\)\\*\\+,;=\\s]+)@", 0),  # noqa: E501
    ('DiscordBotTokenDetector', '[MNO][a-zA-Z\\d_-]{23,25}\\.[a-zA-Z\\d_-]{6}\\.[a-zA-Z\\d_-]{27}', 0),
    ('GitHubTokenDetector', '(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}', 0),
    ('GitLabTokenDetector', '(glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_\\-]{20,50}(?!\\w)', 0),
    ('GitLabTokenDetector', 'GR1348941[A-Za-z0-9_\\-]{20,50}(?!\\w)', 0),
    ('GitLabTokenDetector', 'glcbt-([0-9a-fA-F]{2}_)?[A-Za-z0-9_\\-]{20,50}(?!\\w)', 0),
    ('GitLabTokenDetector', 'glimt-[A-Za-z0-9_\\-]{25}(?!\\w)', 0),
    ('GitLabTokenDetector', 'glptt-[A-Za-z0-9_\\-]{40}(?!\\w)', 0),
    ('GitLabTokenDetector', 'glagent-[A-Za-z0-9_\\-]{50,1024}(?!\\w)', 0),
    ('GitLabTokenDetector', 'gloas-[A-Za-z0-9_\\-]{64}(?!\\w)', 0),
    ('IbmCosHmacDetector', '(?:(?<=\\W)|(?<=^))(?:\\[|)(?:"|\\\'|)(?:(?:ibm)?[-_]?cos[-_]?(?:hmac)?|)(?:_|-|)(?:secret[-_]?(?:access)?[-_]?key)(?:"|\\\'|)(?:\\]|)(?: *)(?:=|:|:=|=>| +|::)(?: *)(?:"|\\\'|)([a-f0-9]{48}(?![a-f0-9]))(?:"|\\\'|)', re.IGNORECASE),  # noqa: E501
    ('JwtTokenDetector', 'eyJ[A-Za-z0-9-_=]+\\.[A-Za-z0-9-_=]+\\.?[A-Za-z0-9-_.+/=]*?', 0),
    ('MailchimpDetector', '[0-9a-z]{32}-us[0-9]{1,2}', 0),
    ('OpenAIDetector', 'sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}', 0),
    ('PrivateKeyDetector', 'BEGIN DSA PRIVATE KEY', 0),
    ('PrivateKeyDetector', 'BEGIN EC PRIVATE KEY', 0),
    ('PrivateKeyDetector', 'BEGIN OPENSSH PRIVATE KEY', 0),
    ('PrivateKeyDetector', 'BEGIN PGP PRIVATE KEY BLOCK', 0),
    ('PrivateKeyDetector', 'BEGIN PRIVATE KEY', 0),
    ('PrivateKeyDetector', 'BEGIN RSA PRIVATE KEY', 0),
    ('PrivateKeyDetector', 'BEGIN SSH2 ENCRYPTED PRIVATE KEY', 0),
    ('PrivateKeyDetector', 'PuTTY-User-Key-File-2', 0),
    ('PypiTokenDetector', 'pypi-AgEIcHlwaS5vcmc[A-Za-z0-9-_]{70,}', 0),
    ('PypiTokenDetector', 'pypi-AgENdGVzdC5weXBpLm9yZw[A-Za-z0-9-_]{70,}', 0),
    ('SendGridDetector', 'SG\\.[a-zA-Z0-9_-]{22}\\.[a-zA-Z0-9_-]{43}', 0),
    ('SlackDetector', 'xox(?:a|b|p|o|s|r)-(?:\\d+-)+[a-z0-9]+', re.IGNORECASE),
    ('SlackDetector', 'https://hooks\\.slack\\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+', re.IGNORECASE | re.VERBOSE),  # noqa: E501
    ('SquareOAuthDetector', 'sq0csp-[0-9A-Za-z\\\\\\-_]{43}', 0),
    ('StripeDetector', '(?:r|s)k_live_[0-9a-zA-Z]{24}', 0),
    ('TelegramBotTokenDetector', '\\d{8,10}:[0-9A-Za-z_-]{35}', 0),
    ('TwilioKeyDetector', 'AC[a-z0-9]{32}', 0),
    ('TwilioKeyDetector', 'SK[a-z0-9]{32}', 0),
)
