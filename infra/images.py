"""Builds the images of `images/` into the stack's ECR repositories, with no Docker daemon on the
machine that runs Pulumi: one AWS CodeBuild project per image.

`pulumi up` uploads each image folder (zipped) to a private bucket under a key named by the
folder's content digest (facts/images.py); S3 tells EventBridge, whose rule starts that
image's CodeBuild project, which builds the Dockerfile and pushes `<repository>:<digest>`.
An unchanged folder is the same object, so nothing is rebuilt; the buildspec skips a tag that
is already pushed (tags are immutable). Training runs name the same tag; their image-check
Job waits for the push (workloads/manifests/objects.py).

A failed build is retried once by CodeBuild itself (`auto_retry_limit`). After that, a build
is started again on demand (`python -m tools.images rebuild`), or by a reviewed deploy: raising
`registry.repositories.<repo>.rebuild` uploads the source under a new key, whose upload starts
the build. Each image builds on a compute type sized for it (facts/images.py, `sizing`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

from facts.images import AUTO_RETRY_LIMIT, IMAGES, QUEUED_TIMEOUT_MINUTES
from facts.names import component_type, image_project
from infra.buckets import harden
from infra.context import StackContext
from infra.iam import account_and_partition, scoped_trust_policy, service_trust_policy
from infra.protection import empties_on_delete, stateful

# CodeBuild's Ubuntu standard image (docker inside; privileged mode to run it); the compute
# type and timeouts of each image are in facts/images.py.
BUILD_IMAGE = "aws/codebuild/standard:7.0"
ECR_PUSH_ACTIONS = [
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:CompleteLayerUpload",
    "ecr:DescribeImages",
    "ecr:GetDownloadUrlForLayer",
    "ecr:InitiateLayerUpload",
    "ecr:PutImage",
    "ecr:UploadLayerPart",
]
BUILDSPEC = """version: 0.2
phases:
  pre_build:
    commands:
      - >-
        aws ecr get-login-password --region "$AWS_REGION"
        | docker login --username AWS --password-stdin "${REPOSITORY_URI%%/*}"
  build:
    commands:
      - |
        if aws ecr describe-images --repository-name "${REPOSITORY_URI#*/}" \\
            --image-ids imageTag="$IMAGE_TAG" >/dev/null 2>&1; then
          echo "$REPOSITORY_URI:$IMAGE_TAG is already pushed (tags are immutable)"
        else
          docker build --pull --tag "$REPOSITORY_URI:$IMAGE_TAG" .
          # A build started while another ran (a rebuild) may find the tag pushed meanwhile.
          if aws ecr describe-images --repository-name "${REPOSITORY_URI#*/}" \\
              --image-ids imageTag="$IMAGE_TAG" >/dev/null 2>&1; then
            echo "$REPOSITORY_URI:$IMAGE_TAG was pushed by another build meanwhile"
          else
            docker push "$REPOSITORY_URI:$IMAGE_TAG"
          fi
        fi
"""


def source_key(repo: str, tag: str, rebuild: int = 0) -> str:
    """The S3 key of an image's source: a new key (a new upload, a new build) per rebuild."""
    return f"images/{repo}/{tag}.zip" if rebuild == 0 else f"images/{repo}/{tag}.rebuild-{rebuild}.zip"


def repository_arn(url: str) -> str:
    """`<account>.dkr.ecr.<region>.amazonaws.com/<name>` -> the repository's ARN."""
    host, _, name = url.partition("/")
    account, _, rest = host.partition(".dkr.ecr.")
    region = rest.split(".amazonaws.com")[0]
    return f"arn:aws:ecr:{region}:{account}:repository/{name}"


def builder_policy(bucket_arn: str, log_group_arn: str, repository_arns: list[str]) -> str:
    """What a build needs: read its sources, write its log group, push to its repositories."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Sid": "Sources", "Effect": "Allow", "Action": ["s3:GetObject", "s3:GetObjectVersion"],
                 "Resource": f"{bucket_arn}/images/*"},
                {"Sid": "SourceBucket", "Effect": "Allow", "Action": ["s3:GetBucketLocation", "s3:GetBucketAcl"],
                 "Resource": bucket_arn},
                {"Sid": "Logs", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                 "Resource": [log_group_arn, f"{log_group_arn}:*"]},
                {"Sid": "Login", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": "*"},
                {"Sid": "Push", "Effect": "Allow", "Action": ECR_PUSH_ACTIONS, "Resource": repository_arns},
            ],
        },
        sort_keys=True,
    )  # fmt: skip


def start_build_policy(project_arns: list[str]) -> str:
    """EventBridge may start these projects' builds, nothing else."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": ["codebuild:StartBuild"], "Resource": project_arns}],
        },
        sort_keys=True,
    )


def upload_event_pattern(bucket: str, repository: str) -> str:
    """EventBridge pattern: an object created under `images/<repository>/` of the sources bucket."""
    return json.dumps(
        {
            "source": ["aws.s3"],
            "detail-type": ["Object Created"],
            "detail": {"bucket": {"name": [bucket]}, "object": {"key": [{"prefix": f"images/{repository}/"}]}},
        },
        sort_keys=True,
    )


class ImageBuilds(pulumi.ComponentResource):
    """A CodeBuild project per image of `images/` the stack's runs use (`repository_urls`: the
    ECR repository of each), and their sources bucket, kept while no run builds."""

    tags: dict[str, str]
    """Repository -> the tag the stack builds."""

    def __init__(
        self,
        name: str,
        repository_urls: Mapping[str, pulumi.Input[str]],
        ctx: StackContext,
        opts: pulumi.ResourceOptions | None = None,
        rebuilds: Mapping[str, int] | None = None,
    ):
        super().__init__(component_type("infra", "ImageBuilds"), name, None, opts)
        self._name, self._ctx, self._rebuilds = name, ctx, dict(rebuilds or {})
        child = pulumi.ResourceOptions(parent=self)
        images = {repo: IMAGES[repo] for repo in sorted(repository_urls) if repo in IMAGES}
        self.tags = {repo: image.tag for repo, image in images.items()}
        # The sources bucket is protected, so it stays whether a run builds now or not (as the ECR
        # repositories do): a stack that pins its last built image must not delete it, or the
        # engine stops the whole update at the protected delete (tests/plan/test_day2_image_sources.py).
        self.bucket = self._sources_bucket()
        if not images:
            self.register_outputs({})
            return
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=f"/codebuild/{ctx.cluster_name}-images",
            retention_in_days=ctx.log_retention_days,
            tags=ctx.owned_tags,
            opts=child,
        )
        arns = pulumi.Output.all(*(pulumi.Output.from_input(repository_urls[r]) for r in images)).apply(
            lambda urls: [repository_arn(u) for u in urls]
        )
        # CodeBuild may assume it for these projects of this account only (no confused deputy);
        # their names are fixed, so their ARNs are known before the projects exist.
        projects = [f"project/{self.project_name(repo)}" for repo in images]
        role = aws.iam.Role(
            f"{name}-builder",
            assume_role_policy=scoped_trust_policy(self, "codebuild.amazonaws.com", "codebuild", ctx.region, projects),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-builder",
            role=role.id,
            policy=pulumi.Output.all(self.bucket.arn, log_group.arn, arns).apply(lambda a: builder_policy(*a)),
            opts=child,
        )
        self.projects = {repo: self._project(repo, repository_urls[repo], role, log_group) for repo in images}
        self._triggers()
        self.register_outputs({"tags": self.tags, "projects": {r: self.project_name(r) for r in images}})

    def key(self, repo: str) -> str:
        """The S3 key of `repo`'s source (facts: its tag; config: its rebuild count)."""
        return source_key(repo, self.tags[repo], self._rebuilds.get(repo, 0))

    def project_name(self, repo: str) -> str:
        """The CodeBuild project that builds `repo`'s image."""
        return image_project(self._ctx.cluster_name, repo)

    def _sources_bucket(self) -> aws.s3.Bucket:
        """Hardened like every bucket (infra.buckets), and reporting uploads to EventBridge."""
        name, ctx = self._name, self._ctx
        child = pulumi.ResourceOptions(parent=self)
        bucket = aws.s3.Bucket(
            f"{name}-sources",
            bucket_prefix=f"{ctx.cluster_name}-image-sources-"[:37],
            force_destroy=empties_on_delete(ctx.protect),
            tags=ctx.owned_tags,
            opts=stateful(ctx.protect, child),
        )
        harden(f"{name}-sources", bucket, child, ctx.bucket_lifecycle)
        self.notification = aws.s3.BucketNotification(f"{name}-sources", bucket=bucket.id, eventbridge=True, opts=child)
        return bucket

    def _project(
        self, repo: str, url: pulumi.Input[str], role: aws.iam.Role, log_group: aws.cloudwatch.LogGroup
    ) -> aws.codebuild.Project:
        name, ctx, image = self._name, self._ctx, IMAGES[repo]
        key = self.key(repo)
        env = aws.codebuild.ProjectEnvironmentEnvironmentVariableArgs
        project = aws.codebuild.Project(
            f"{name}-{repo}",
            name=self.project_name(repo),
            description=f"Builds images/{repo}/Dockerfile into {repo}:<content digest>",
            service_role=role.arn,
            build_timeout=image.build_timeout_minutes,
            queued_timeout=QUEUED_TIMEOUT_MINUTES,
            auto_retry_limit=AUTO_RETRY_LIMIT,
            artifacts=aws.codebuild.ProjectArtifactsArgs(type="NO_ARTIFACTS"),
            environment=aws.codebuild.ProjectEnvironmentArgs(
                type="LINUX_CONTAINER",
                compute_type=image.compute_type,
                image=BUILD_IMAGE,
                privileged_mode=True,
                environment_variables=[
                    env(name="REPOSITORY_URI", value=url),
                    env(name="IMAGE_TAG", value=self.tags[repo]),
                ],
            ),
            source=aws.codebuild.ProjectSourceArgs(
                type="S3", location=pulumi.Output.concat(self.bucket.bucket, "/", key), buildspec=BUILDSPEC
            ),
            logs_config=aws.codebuild.ProjectLogsConfigArgs(
                cloudwatch_logs=aws.codebuild.ProjectLogsConfigCloudwatchLogsArgs(
                    status="ENABLED", group_name=log_group.name
                )
            ),
            tags=ctx.owned_tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        return project

    def _triggers(self) -> None:
        """EventBridge starts a project's build when its source lands; the source is uploaded
        last, once the project names it and the rule listens. The role EventBridge assumes to
        start builds trusts these rules of this account only (EventBridge guide, cross-service
        confused deputy prevention: for event bus rule targets, aws:SourceArn is the rule ARN)."""
        name = self._name
        child = pulumi.ResourceOptions(parent=self)
        rules = {
            repo: aws.cloudwatch.EventRule(
                f"{name}-{repo}",
                description=f"Build the {repo} image when its source is uploaded",
                event_pattern=self.bucket.bucket.apply(lambda b, r=repo: upload_event_pattern(b, r)),
                opts=child,
            )
            for repo in self.projects
        }
        events_role = aws.iam.Role(
            f"{name}-events",
            assume_role_policy=pulumi.Output.all(account_and_partition(self), *(r.arn for r in rules.values())).apply(
                lambda a: service_trust_policy("events.amazonaws.com", source_account=a[0][0], source_arns=a[1:])
            ),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-events",
            role=events_role.id,
            policy=pulumi.Output.all(*(p.arn for p in self.projects.values())).apply(
                lambda arns: start_build_policy(list(arns))
            ),
            opts=child,
        )
        for repo, project in self.projects.items():
            target = aws.cloudwatch.EventTarget(
                f"{name}-{repo}", rule=rules[repo].name, arn=project.arn, role_arn=events_role.arn, opts=child
            )
            aws.s3.BucketObjectv2(
                f"{name}-{repo}",
                bucket=self.bucket.id,
                key=self.key(repo),
                source=pulumi.FileArchive(IMAGES[repo].relative_folder),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[project, target, self.notification]),
            )
