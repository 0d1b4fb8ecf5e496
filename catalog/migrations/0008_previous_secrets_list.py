from django.db import migrations, models


def carry_over(apps, schema_editor):
    Endpoint = apps.get_model("catalog", "Endpoint")
    for endpoint in Endpoint.objects.exclude(previous_secret_encrypted=""):
        if endpoint.previous_secret_expires_at is not None:
            endpoint.previous_secrets = [
                {
                    "encrypted": endpoint.previous_secret_encrypted,
                    "expires_at": endpoint.previous_secret_expires_at.isoformat(),
                }
            ]
            endpoint.save(update_fields=["previous_secrets"])


class Migration(migrations.Migration):
    dependencies = [("catalog", "0007_endpoint_failure_streak")]

    operations = [
        migrations.AddField(
            model_name="endpoint",
            name="previous_secrets",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.RunPython(carry_over, migrations.RunPython.noop),
        migrations.RemoveField(model_name="endpoint", name="previous_secret_encrypted"),
        migrations.RemoveField(model_name="endpoint", name="previous_secret_expires_at"),
    ]
