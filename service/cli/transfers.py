"""`wis upload`, `wis push`, `wis export` and `wis import`: files and archives through the API."""
import sys

from service.cli.common import (add_comment_option, add_server_options, make_client, progress_bar, show_result,
                                transfer_progress, upload_options)
from service.client import transfer
from service.interface import DESTINATIONS
from service.interface.archive import ArchiveReader

# What Ctrl-C leaves of a command that uploads: the uploads resume, and what was applied is not applied twice.
RESUME = "interrupted; run the same command again to go on: an upload resumes where it stopped"


def add_commands(commands):
    upload = commands.add_parser("upload", help="upload a media file and print its path")
    upload.add_argument("file")
    upload.add_argument("--destination", choices=list(DESTINATIONS),
                        help="default: from the file's content: PNG or JPEG -> stepImage, MP4 -> stepVideo, "
                             "GIF -> stepVideoGif")
    add_server_options(upload)
    upload.set_defaults(run=upload_command, interrupted=RESUME)

    push = commands.add_parser(
        "push", help="create or update stations, processes and products described in JSON or YAML files",
        description="Each file holds one object or a list of objects, each of the form {\"station\": {...}}, "
                    "{\"process\": {...}} or {\"product\": {...}}. Directories are searched for "
                    ".json, .yaml and .yml files. Local media paths are uploaded first, to the destination "
                    "their content says.")
    push.add_argument("files", nargs="+", metavar="FILE")
    push.add_argument("--dry-run", action="store_true",
                      help="write nothing: check the files, the local media (format, size) and every object with the "
                           "server's dryRun")
    add_comment_option(push)
    add_server_options(push)
    push.set_defaults(run=push_command, interrupted=RESUME)

    export = commands.add_parser(
        "export", help="write one org's stations, processes, products and their media into an archive (.tar.gz)",
        description="Reads every object of the token's org in input form and the media its processes refer to, "
                    "through the API, into an archive of format 1 that `wis import` reads.")
    export.add_argument("file", metavar="FILE", help="the archive to write (one that exists is replaced once the "
                                                      "new one is whole; a failed export leaves it as it was)")
    export.add_argument("--org", default="default",
                        help="the org's name recorded in the archive's manifest (the API does not tell a client its "
                             "org; default: default)")
    add_server_options(export)
    export.set_defaults(run=export_command, interrupted="interrupted; the archive was not written (a file that was "
                                                            "there is as it was)")

    import_ = commands.add_parser(
        "import", help="send an archive of `wis export` to a server (media, stations, processes, products)",
        description="Checks the whole archive first (a damaged one sends nothing), then uploads its media, rewrites "
                    "the media paths of its processes to the paths the server answers, and creates or updates "
                    "stations, processes and products. Running it again changes nothing.")
    import_.add_argument("file", metavar="FILE")
    import_.add_argument("--dry-run", action="store_true",
                         help="write nothing: check the archive, its media locally and every object with the "
                              "server's dryRun")
    add_comment_option(import_)
    add_server_options(import_)
    import_.set_defaults(run=import_command, interrupted=RESUME)


def upload_command(args):
    with make_client(args) as client, progress_bar(args, args.file) as hooks:
        path = client.upload(args.file, args.destination, **upload_options(args), **hooks)
    print(path)


def push_command(args):
    with make_client(args) as client:
        results = client.push(args.files, on_result=show_result, progress_for=lambda file: progress_bar(args, file),
                              dry_run=args.dry_run, comment=args.comment, **upload_options(args))
    return 1 if any(result.error is not None for result in results) else 0


def export_command(args):
    with make_client(args) as client, transfer_progress(args) as progress:
        exported = transfer.export_org(client, args.file, args.org, on_result=show_result, progress=progress)
    counts = exported.counts
    print(f"exported {counts['stations']} station(s), {counts['processes']} process(es), {counts['products']} "
          f"product(s) and {counts['media']} media file(s) of org {args.org} to {args.file}", file=sys.stderr)
    return 1 if exported.problems else 0


def import_command(args):
    reader = ArchiveReader(args.file)
    contents = reader.check()
    print(f"{args.file}: org {contents.org}, exported {contents.exported_at}: "
          f"{contents.counts['stations']} station(s), "
          f"{contents.counts['processes']} process(es), {contents.counts['products']} product(s), "
          f"{contents.counts['media']} media file(s)" + (" (dry run: nothing is written)" if args.dry_run else ""),
          file=sys.stderr)
    media_bytes = sum(record["size"] for record in contents.media.values())
    objects = sum(len(ids) for ids in contents.ids.values())
    with make_client(args) as client, transfer_progress(args, media_bytes, objects) as progress:
        results = transfer.import_archive(client, reader, dry=args.dry_run, on_result=show_result,
                                          progress=progress, upload_options=upload_options(args),
                                          comment=args.comment)
    failed = sum(result.error is not None for result in results)
    print(f"{len(results) - failed} entr{'y' if len(results) - failed == 1 else 'ies'} "
          f"{'checked' if args.dry_run else 'imported'}, {failed} failed", file=sys.stderr)
    return 1 if failed else 0
