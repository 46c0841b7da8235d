"""Model directories for the end-to-end tests: a copy of a repository model whose files are
symlinks, except one JSON file written with fields changed (corrupt or contradicting configs)."""
import json
import os


def linked_copy(src, dst, json_name, changes, dump=json.dumps):
    """dst: src's files linked, `json_name` rewritten from src's with `changes` applied (a value
    of None removes the field); `dump` turns the dict into the file's text."""
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        if f != json_name and not os.path.exists(os.path.join(dst, f)):
            os.symlink(os.path.join(src, f), os.path.join(dst, f))
    with open(os.path.join(src, json_name)) as f:
        c = json.load(f)
    for k, v in changes.items():
        if v is None:
            c.pop(k, None)
        else:
            c[k] = v
    with open(os.path.join(dst, json_name), "w") as f:
        f.write(dump(c))
    return dst
