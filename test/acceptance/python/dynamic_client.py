"""Drives a nodus server with the official Python Kubernetes client's DynamicClient (python3-kubernetes 22.6.0).

Usage: /usr/bin/python3 dynamic_client.py <server url> <token> <CA file> <discovery cache file>

Runs one step after another against nodus.dev/v1 Job in a fresh project and prints ONE JSON document on stdout with
what each step saw; PythonClient.test.ts asserts on it. On an unexpected exception it prints
{"error": ..., "traceback": ..., "results": <steps so far>} and exits 1.
"""
import json
import sys
import threading
import traceback

from kubernetes import client, watch
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ConflictError, NotFoundError

NAMESPACE = "py-demo"

results = {}


def job_body(name, image="python:3.12", labels=None):
    return {
        "apiVersion": "nodus.dev/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels or {"team": "a"}},
        "spec": {"image": image, "command": ["python", "train.py"]},
    }


def api_error(error):
    """The HTTP status and the Status reason/message of a DynamicApiError."""
    try:
        body = json.loads(error.body)
    except (TypeError, ValueError):
        body = {}
    return {
        "status": error.status,
        "type": type(error).__name__,
        "reason": body.get("reason"),
        "message": body.get("message"),
        "kind": body.get("kind"),
    }


def connect(url, token, ca_file, cache_file):
    cfg = client.Configuration()
    cfg.host = url
    cfg.api_key = {"authorization": token}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    cfg.ssl_ca_cert = ca_file
    return DynamicClient(client.ApiClient(cfg), cache_file=cache_file)


def create_namespace(dyn):
    namespaces = dyn.resources.get(api_version="v1", kind="Namespace")
    created = namespaces.create(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    fetched = namespaces.get(name=NAMESPACE)
    results["namespace"] = {
        "created": created.metadata.name,
        "fetched": fetched.metadata.name,
        "phase": fetched.status.phase if fetched.status else None,
    }


def create_and_get(jobs):
    created = jobs.create(body=job_body("py-job"), namespace=NAMESPACE)
    fetched = jobs.get(name="py-job", namespace=NAMESPACE)
    results["create"] = {
        "name": created.metadata.name,
        "namespace": created.metadata.namespace,
        "uid": created.metadata.uid,
        "resourceVersion": created.metadata.resourceVersion,
    }
    results["get"] = {
        "name": fetched.metadata.name,
        "uid": fetched.metadata.uid,
        "image": fetched.spec.image,
        "kind": fetched.kind,
        "apiVersion": fetched.apiVersion,
    }


def duplicate_create(jobs):
    try:
        jobs.create(body=job_body("py-job"), namespace=NAMESPACE)
        results["duplicate"] = {"status": None}
    except ConflictError as error:
        results["duplicate"] = api_error(error)


def list_jobs(jobs):
    jobs.create(body=job_body("py-other", labels={"team": "b"}), namespace=NAMESPACE)
    everything = jobs.get(namespace=NAMESPACE)
    by_label = jobs.get(namespace=NAMESPACE, label_selector="team=b")
    by_field = jobs.get(namespace=NAMESPACE, field_selector="metadata.name=py-job")
    both = jobs.get(namespace=NAMESPACE, label_selector="team=a", field_selector="metadata.name=py-other")
    all_projects = jobs.get()
    results["list"] = {
        "kind": everything.kind,
        "names": sorted(item.metadata.name for item in everything.items),
        "labelSelected": [item.metadata.name for item in by_label.items],
        "fieldSelected": [item.metadata.name for item in by_field.items],
        "bothSelected": [item.metadata.name for item in both.items],
        "allProjects": sorted(f"{item.metadata.namespace}/{item.metadata.name}" for item in all_projects.items),
    }


def merge_patch(jobs):
    patched = jobs.patch(
        name="py-job",
        namespace=NAMESPACE,
        body={"metadata": {"labels": {"stage": "patched"}}, "spec": {"backoffLimit": 2}},
        content_type="application/merge-patch+json",
    )
    fetched = jobs.get(name="py-job", namespace=NAMESPACE)
    results["patch"] = {
        "backoffLimit": patched.spec.backoffLimit,
        "labels": dict(patched.metadata.labels),
        "fetchedBackoffLimit": fetched.spec.backoffLimit,
        "fetchedImage": fetched.spec.image,
        "generation": fetched.metadata.generation,
    }


def status_patch(jobs):
    patched = jobs.status.patch(
        name="py-job",
        namespace=NAMESPACE,
        body={"status": {"phase": "Running"}, "spec": {"image": "ignored:1"}},
        content_type="application/merge-patch+json",
    )
    fetched = jobs.get(name="py-job", namespace=NAMESPACE)
    results["statusPatch"] = {
        "phase": patched.status.phase,
        "fetchedPhase": fetched.status.phase,
        "fetchedImage": fetched.spec.image,
        "fetchedBackoffLimit": fetched.spec.backoffLimit,
        "generation": fetched.metadata.generation,
    }


def replace(jobs):
    current = jobs.get(name="py-job", namespace=NAMESPACE).to_dict()
    before = current["metadata"]["resourceVersion"]
    current["spec"]["backoffLimit"] = 5
    replaced = jobs.replace(body=current, namespace=NAMESPACE)
    fetched = jobs.get(name="py-job", namespace=NAMESPACE)
    stale = dict(current, metadata=dict(current["metadata"], resourceVersion=before))
    try:
        jobs.replace(body=stale, namespace=NAMESPACE)
        stale_error = {"status": None}
    except ConflictError as error:
        stale_error = api_error(error)
    results["replace"] = {
        "backoffLimit": replaced.spec.backoffLimit,
        "fetchedBackoffLimit": fetched.spec.backoffLimit,
        "resourceVersionChanged": fetched.metadata.resourceVersion != before,
        "stale": stale_error,
    }


def dry_run(jobs):
    answer = jobs.create(body=job_body("py-dry"), namespace=NAMESPACE, dry_run="All")
    try:
        jobs.get(name="py-dry", namespace=NAMESPACE)
        after = {"status": 200}
    except NotFoundError as error:
        after = api_error(error)
    results["dryRun"] = {"name": answer.metadata.name, "image": answer.spec.image, "after": after}


def delete(jobs):
    jobs.delete(name="py-other", namespace=NAMESPACE)
    try:
        jobs.get(name="py-other", namespace=NAMESPACE)
        after = {"status": 200}
    except NotFoundError as error:
        after = api_error(error)
    try:
        jobs.delete(name="py-other", namespace=NAMESPACE)
        again = {"status": 200}
    except NotFoundError as error:
        again = api_error(error)
    results["delete"] = {
        "after": after,
        "again": again,
        "remaining": sorted(item.metadata.name for item in jobs.get(namespace=NAMESPACE).items),
    }


def watch_events(jobs):
    """Watches from a list's resourceVersion in a thread while this thread creates, modifies and deletes a job."""
    start = jobs.get(namespace=NAMESPACE).metadata.resourceVersion
    events = []
    failures = []
    watcher = watch.Watch()

    def collect():
        try:
            for event in jobs.watch(namespace=NAMESPACE, resource_version=start, timeout=10, watcher=watcher):
                name = event["object"].metadata.name
                spec = event["raw_object"].get("spec", {})
                events.append({"type": event["type"], "name": name, "image": spec.get("image"), "backoffLimit": spec.get("backoffLimit")})
                if event["type"] == "DELETED" and name == "py-watched":
                    watcher.stop()
                    break
        except Exception:  # reported to the main thread
            failures.append(traceback.format_exc())

    thread = threading.Thread(target=collect)
    thread.start()
    jobs.create(body=job_body("py-watched"), namespace=NAMESPACE)
    jobs.patch(name="py-watched", namespace=NAMESPACE, body={"spec": {"backoffLimit": 3}},
               content_type="application/merge-patch+json")
    jobs.delete(name="py-watched", namespace=NAMESPACE)
    thread.join(30)
    if failures:
        raise RuntimeError("watch thread failed:\n" + failures[0])
    results["watch"] = {"finished": not thread.is_alive(), "events": events}


def main():
    url, token, ca_file, cache_file = sys.argv[1:5]
    dyn = connect(url, token, ca_file, cache_file)
    create_namespace(dyn)
    jobs = dyn.resources.get(api_version="nodus.dev/v1", kind="Job")
    create_and_get(jobs)
    duplicate_create(jobs)
    list_jobs(jobs)
    merge_patch(jobs)
    status_patch(jobs)
    replace(jobs)
    dry_run(jobs)
    delete(jobs)
    watch_events(jobs)


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # any unexpected failure: report what we have and the traceback
        print(json.dumps({"error": repr(error), "traceback": traceback.format_exc(), "results": results}))
        sys.exit(1)
    print(json.dumps(results))
