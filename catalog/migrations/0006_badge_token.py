import secrets

from django.db import migrations, models

import catalog.models


def give_badge_tokens(apps, schema_editor):
    Dataset = apps.get_model("catalog", "Dataset")
    for dataset in Dataset.objects.filter(badge_token__isnull=True).only("pk"):
        dataset.badge_token = secrets.token_urlsafe(32)
        dataset.save(update_fields=["badge_token"])


class Migration(migrations.Migration):
    dependencies = [("catalog", "0005_freshness")]

    operations = [
        migrations.AddField(
            model_name="dataset",
            name="badge_token",
            field=models.CharField(max_length=43, null=True),
        ),
        migrations.RunPython(give_badge_tokens, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="dataset",
            name="badge_token",
            field=models.CharField(default=catalog.models._badge_token, max_length=43, unique=True),
        ),
    ]
