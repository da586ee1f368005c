"""Shared fixtures of the platform tests.

``aws_env``: the gateway finds AWS credentials through botocore's chain from the environment
only (``AWS_CONFIG_FILE`` / ``AWS_SHARED_CREDENTIALS_FILE`` point at empty files, the instance
metadata service is off), so this machine's own AWS setup is never read; the keys are the
Bedrock double's (tests/support/bedrock_double.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.bedrock_double import ACCESS_KEY, API_KEY, SECRET_KEY, SESSION_TOKEN


@pytest.fixture(scope="module")
def aws_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    empty = tmp_path_factory.mktemp("aws")
    (empty / "config").write_text("")
    (empty / "credentials").write_text("")
    with pytest.MonkeyPatch.context() as mp:
        for name in (
            "AWS_PROFILE",
            "AWS_DEFAULT_PROFILE",
            "AWS_ROLE_ARN",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        ):
            mp.delenv(name, raising=False)
        mp.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        mp.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        mp.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
        mp.setenv("AWS_CONFIG_FILE", str(empty / "config"))
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty / "credentials"))
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        mp.setenv("BEDROCK_TEST_API_KEY", API_KEY)
        yield
